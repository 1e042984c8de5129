#!/usr/bin/env bash
# Agreement with the oracle's recorded truth, counted by ../shared/oracle/compare.py: for each
# release and level, the public corpus and (with a node corpus) the ONNX backend node tests.
#
#   tools/oracle/agreement.sh [NODE_CORPUS_DIR]      # build first: cargo build --release
#
# NODE_CORPUS_DIR is `build_node_corpus.py`'s output; its path must contain `corpus/node/` (compare.py
# keys records by the path after `corpus/`). Outputs go to ${TMPDIR:-/tmp}/onnx-lint-agreement/.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
shared="${ONNX_LINT_SHARED:-$repo/../shared}"
bin="${ONNX_LINT_BIN:-$repo/target/release/cargo-onnx-lint}"
out="${TMPDIR:-/tmp}/onnx-lint-agreement"
mkdir -p "$out"
find "$shared/corpus/models" -name '*.onnx' | sort > "$out/models.txt"
sets=(models)
if [ -n "${1:-}" ]; then
  find -L "$1" -name '*.onnx' | sort > "$out/node.txt"
  sets+=(node)
fi
for v in 1.23.2 1.24.4 1.31.1; do
  for l in disable all; do
    for s in "${sets[@]}"; do
      xargs -a "$out/$s.txt" "$bin" place --ort "$v" --opt-level "$l" --format json > "$out/$s-$v-$l.json" 2>/dev/null || true
      r=$(python3 "$shared/oracle/compare.py" "$shared/corpus/truth/$s-$v-$l.jsonl" "$out/$s-$v-$l.json" --show 0 | sed -n 2p)
      printf "%-6s %s %-7s %s\n" "$s" "$v" "$l" "$r"
    done
  done
done
