#!/usr/bin/env bash
# Re-records ORT's own placement (the stubbed-GPU oracle, ../shared/oracle/ortstub.py) for every
# model under tests/fixtures/fix/ -- the fixtures and the fixed models the tests write -- at ORT
# 1.24.4, level all, into tests/fixtures/fix/truth-1.24.4-all.jsonl (one record per line, with
# `model` and the file's `sha256`, so the test knows the truth is about these very bytes).
#
#   /work/venv/bin/python tools/fix/make_fixtures.py          # the fixtures
#   ONNX_LINT_BLESS=1 cargo test --test it fix::               # the fixed models (*.fixed.onnx)
#   tools/fix/refresh_truth.sh                                 # ORT's answers
#
# Needs the oracle's wheel for 1.24.4 (`python3 ../shared/oracle/ortstub.py prepare 1.24.4`).
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
py="${PYTHON:-/work/venv/bin/python}"
oracle="${ORACLE:-$here/../shared/oracle/ortstub.py}"
dir="$here/tests/fixtures/fix"
out="$dir/truth-1.24.4-all.jsonl"
tmp="$(mktemp)"
for m in "$dir"/*.onnx; do
  name="$(basename "$m")"
  sha="$(sha256sum "$m" | cut -d' ' -f1)"
  "$py" "$oracle" place 1.24.4 "$m" --level all 2>/dev/null |
    "$py" -c 'import json,sys; r=json.load(sys.stdin); r["model"]=sys.argv[1]; r["sha256"]=sys.argv[2]; print(json.dumps(r, sort_keys=True))' "$name" "$sha" >>"$tmp"
done
mv "$tmp" "$out"
echo "wrote $out ($(wc -l <"$out") records)"
