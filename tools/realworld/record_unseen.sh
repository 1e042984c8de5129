#!/usr/bin/env bash
# Record ORT's answers for the unseen quantized models only (tests/fixtures/realworld/unseen.txt,
# made by `tools/realworld/gen.py --unseen`) and merge them into the real-world fixtures: the
# stubbed-GPU oracle (1.23.2, 1.24.4: disable, all; 1.31.1: every level) and the CPU wheels'
# CPU-only sessions (every release and level).
#
#   ORT_CPU_ROOT=/tmp/ort-cpu PYTHON=python3 tools/realworld/record_unseen.sh
#
# ORT_CPU_ROOT/<release> is `pip install --no-deps --target` of the CPU `onnxruntime` wheel.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
shared="${ONNX_LINT_SHARED:-$repo/../shared}"
py="${PYTHON:-python3}"
fixtures="$repo/tests/fixtures/realworld"
work="${TMPDIR:-/tmp}/onnx-lint-unseen"
rm -rf "$work" && mkdir -p "$work/corpus/realworld" "$work/cpu"
while read -r m; do
  case "$m" in ''|'#'*) continue ;; esac
  ln -s "$fixtures/$m" "$work/corpus/realworld/$m"
done < "$fixtures/unseen.txt"
for ort in 1.23.2 1.24.4 1.31.1; do
  "$py" "$shared/oracle/ortstub.py" prepare "$ort"
  levels="disable all"
  [ "$ort" = "1.31.1" ] && levels="disable basic extended all"
  for level in $levels; do
    raw="$work/realworld-$ort-$level.jsonl"
    "$py" "$shared/oracle/batch.py" "$raw" --versions "$ort" --level "$level" "$work/corpus/realworld"/*.onnx
    sed -i "s#$work/corpus/##g" "$raw"
    "$py" "$repo/tools/oracle/slim.py" "$raw" "$raw.gz"
    "$py" "$here/merge.py" "$fixtures/oracle/realworld-$ort-$level.jsonl.gz" "$raw.gz"
  done
done
"$py" "$here/cpu_truth.py" --ort-root "${ORT_CPU_ROOT:-/tmp/ort-cpu}" --releases 1.23.2,1.24.4,1.31.1 \
  "$work/cpu" "realworld=$work/corpus/realworld"
for f in "$work/cpu"/*.jsonl.gz; do
  "$py" "$here/merge.py" "$fixtures/oracle/$(basename "$f")" "$f"
done
