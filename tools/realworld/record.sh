#!/usr/bin/env bash
# Record ORT's answers for the real-world corpus (tests/fixtures/realworld/) with the stubbed-GPU
# oracle: tests/fixtures/realworld/oracle/realworld-<ort>-<level>.jsonl.gz, levels disable and
# all on every release, and basic and extended on the newest.
#
#   tools/realworld/record.sh [1.23.2 1.24.4 1.31.1]
#   SET=unseen tools/realworld/record.sh ...   # tests/fixtures/realworld/unseen -> oracle/unseen-*
#
# Needs ../shared/oracle and the same Python set-up as tools/oracle/refresh.sh. About 1 s per
# model and level. The CPU-only truth is tools/realworld/cpu_truth.py's.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
shared="${ONNX_LINT_SHARED:-$repo/../shared}"
py="${PYTHON:-python3}"
releases=("${@:-1.23.2 1.24.4 1.31.1}")
set_name="${SET:-realworld}"
src="$repo/tests/fixtures/realworld"
[ "$set_name" = realworld ] || src="$src/$set_name"
work="${TMPDIR:-/tmp}/onnx-lint-$set_name"
rm -rf "$work" && mkdir -p "$work/corpus"
# slim.py keys records by the path after `corpus/`: <set>/<name>.onnx
ln -s "$src" "$work/corpus/$set_name"
for ort in ${releases[@]}; do
  "$py" "$shared/oracle/ortstub.py" prepare "$ort"
  levels="disable all"
  [ "$ort" = "1.31.1" ] && levels="disable basic extended all"
  for level in $levels; do
    raw="$work/$set_name-$ort-$level.jsonl"
    "$py" "$shared/oracle/batch.py" "$raw" --versions "$ort" --level "$level" "$work/corpus/$set_name"/*.onnx
    # No machine's paths in the fixtures (ORT's load errors name the model file).
    sed -i "s#$work/corpus/##g" "$raw"
    "$py" "$repo/tools/oracle/slim.py" "$raw" "$repo/tests/fixtures/realworld/oracle/$set_name-$ort-$level.jsonl.gz"
  done
done
