#!/usr/bin/env bash
# Copies the public corpus (the oracle's `corpus/models`: mobius/, torch/, zoo/) into
# tests/fixtures/corpus/models and rewrites tests/fixtures/corpus/SHA256SUMS.
#
#   tools/corpus/refresh.sh [SRC]     SRC defaults to ../shared/corpus/models
#
# The oracle's records for these models (tests/fixtures/oracle/models-*.jsonl.gz) must be
# refreshed with them (tools/oracle/refresh.sh); the differential test fails when a record has
# no model or a model no record.
set -euo pipefail
cd "$(dirname "$0")/../.."
src="${1:-../shared/corpus/models}"
[ -d "$src" ] || { echo "no corpus at $src" >&2; exit 2; }
dest=tests/fixtures/corpus/models
tmp=$(mktemp -d tests/fixtures/corpus/.models.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
(cd "$src" && find . -type f -name '*.onnx' -print0) | (cd "$src" && xargs -0 cp --parents -t "$OLDPWD/$tmp")
chmod -R u+w "$tmp" && chmod 755 "$tmp"
(cd "$tmp" && find . -type f -name '*.onnx' | LC_ALL=C sort | sed 's|^\./||' | xargs sha256sum) \
  > tests/fixtures/corpus/SHA256SUMS.tmp
rm -rf "$dest"
mv "$tmp" "$dest"
mv tests/fixtures/corpus/SHA256SUMS.tmp tests/fixtures/corpus/SHA256SUMS
echo "$(wc -l < tests/fixtures/corpus/SHA256SUMS) models in $dest"
