#!/bin/sh
# Records the stubbed-GPU oracle's truth for tests/fixtures/tsdecoders/ (see its README).
#   tools/tsexport/record_fixtures.sh [PYTHON]   (a Python with onnx, numpy, protobuf, packaging, flatbuffers)
set -e
py=${1:-python3}
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
cd "$root/tests/fixtures"
for ort in 1.23.2 1.24.4 1.31.1; do for level in disable basic extended all; do
  "$py" "$root/../shared/oracle/batch.py" "$tmp/t.jsonl" --versions $ort --level $level tsdecoders/*.onnx
  "$py" "$root/tools/oracle/slim.py" "$tmp/t.jsonl" "tsdecoders/oracle/tsdecoders-$ort-$level.jsonl.gz"
  rm -f "$tmp/t.jsonl"
done; done
rmdir "$tmp"
