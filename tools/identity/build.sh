#!/bin/sh
# Builds the binary the identity harness runs: the release profile with incremental compilation
# (`target/identity/`), so that the rebuild after each step of a refactor is quick.
set -e
cd "$(dirname "$0")/../.."
exec nice -n 10 cargo build --bin cargo-onnx-lint --profile identity \
  --config 'profile.identity.inherits="release"' \
  --config 'profile.identity.incremental=true' \
  --config 'profile.identity.codegen-units=64'
