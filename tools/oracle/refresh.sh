#!/usr/bin/env bash
# Re-record the oracle's golden fixtures for one ORT release, on a machine without a GPU.
#
#   tools/oracle/refresh.sh 1.24.4 [disable all ...]
#
# Needs ../shared/oracle (ortstub.py, batch.py, build_node_corpus.py), Python 3.11 with numpy,
# protobuf, packaging, flatbuffers and onnx==1.23.2, gcc, nm; downloads the onnxruntime-gpu wheel
# once (~300 MB, cached in $ORTSTUB_ROOT, default ~/.cache/ortstub). About 1 s per model and level.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
shared="${ONNX_LINT_SHARED:-$repo/../shared}"
ort="$1"; shift
levels=("${@:-disable all}")
work="${TMPDIR:-/tmp}/onnx-lint-oracle"
mkdir -p "$work/corpus"
# compare.py and the fixtures key records by the path after `corpus/`.
[ -e "$work/corpus/models" ] || ln -s "$(cd "$shared/corpus/models" && pwd)" "$work/corpus/models"
[ -d "$work/corpus/node" ] || python3 "$shared/oracle/build_node_corpus.py" "$work/corpus/node"
python3 "$shared/oracle/ortstub.py" prepare "$ort"
for level in ${levels[@]}; do
  for set in models node; do
    raw="$work/$set-$ort-$level.jsonl"
    rm -f "$raw"
    python3 "$shared/oracle/batch.py" "$raw" --versions "$ort" --level "$level" "$work/corpus/$set"
    python3 "$here/slim.py" "$raw" "$repo/tests/fixtures/oracle/$set-$ort-$level.jsonl.gz"
  done
done
