#!/usr/bin/env bash
# The benchmark run behind README "Benchmarks", from the repository root of a checkout that holds
# the release binary (target/release/cargo-onnx-lint) and the bench binary (`cargo bench --bench
# speed --no-run` prints its path), e.g. on the device machine:
#
#   tools/bench/device.sh BENCH_EXE [BASE_BIN]
#
# 1. the bench's table (decoders of 1k..1M nodes: decode floor, place disable/all with peak RSS,
#    CPU onnxruntime session creation up to ONNX_LINT_BENCH_ORT_MAX nodes, and whole-process
#    side by side on the TorchScript-style Llama and the real exports in $ONNX_LINT_TSDECODERS);
# 2. per real export and level: place against CPU onnxruntime session creation, whole process,
#    alternating pairs (tools/bench/ab.py);
# 3. with BASE_BIN (an older build): BASE against this build, alternating pairs, same output.
set -euo pipefail
bench="$1"
base="${2:-}"
export ONNX_LINT_PYTHON="${ONNX_LINT_PYTHON:-python3}"
export ONNX_LINT_BENCH_ORT_MAX="${ONNX_LINT_BENCH_ORT_MAX:-10000}"
export ONNX_LINT_TSDECODERS="${ONNX_LINT_TSDECODERS:-target/tsdecoders}"
bin=target/release/cargo-onnx-lint
nproc; uptime
"$ONNX_LINT_PYTHON" -c 'import onnxruntime, onnx; print("onnxruntime", onnxruntime.__version__, "onnx", onnx.__version__)' || true
"$bench"
for m in "$ONNX_LINT_TSDECODERS"/*.onnx; do
  for level in disable all; do
    echo "== $(basename "$m") $level: A = place, B = CPU onnxruntime session (whole process)"
    python3 tools/bench/ab.py --runs "${AB_RUNS:-7}" -- "$bin" place "$m" --ort 1.31.1 --opt-level "$level" \
      --format json -- '{ort}' "$m" "$level"
    if [ -n "$base" ]; then
      echo "== $(basename "$m") $level: A = $base, B = this build (same output)"
      python3 tools/bench/ab.py --runs "${AB_RUNS:-9}" --same-output -- "$base" place "$m" --ort 1.31.1 \
        --opt-level "$level" --format json -- "$bin" place "$m" --ort 1.31.1 --opt-level "$level" --format json
    fi
  done
done
