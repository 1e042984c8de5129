#!/usr/bin/env bash
# Regenerate the probe models (tests/fixtures/probes/) and record ORT's answers for them
# (tests/fixtures/oracle/probes-<ort>-all.jsonl.gz), on a machine without a GPU.
#
#   tools/probes/record.sh [1.23.2 1.24.4 1.31.1]
#
# Needs ../shared/oracle and the same Python set-up as tools/oracle/refresh.sh.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
shared="${ONNX_LINT_SHARED:-$repo/../shared}"
releases=("${@:-1.23.2 1.24.4 1.31.1}")
work="${TMPDIR:-/tmp}/onnx-lint-probes"
rm -rf "$work" && mkdir -p "$work/corpus"
python3 "$here/gen.py" "$repo/tests/fixtures/probes"
# slim.py keys records by the path after `corpus/`: probes/<name>.onnx
ln -s "$repo/tests/fixtures/probes" "$work/corpus/probes"
for ort in ${releases[@]}; do
  python3 "$shared/oracle/ortstub.py" prepare "$ort"
  raw="$work/probes-$ort-all.jsonl"
  python3 "$shared/oracle/batch.py" "$raw" --versions "$ort" --level all "$work/corpus/probes"
  python3 "$repo/tools/oracle/slim.py" "$raw" "$repo/tests/fixtures/oracle/probes-$ort-all.jsonl.gz"
done
