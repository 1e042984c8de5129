#!/usr/bin/env bash
# Prints a 16-hex-digit digest of the sources the binary is built from (Cargo.toml, Cargo.lock,
# src/, kernel-tables/: names and contents), run in the repository root or the folder given. The
# Action (action.yml) keys its cache on it and takes a release's prebuilt binary only when the
# release's `sources.sha256` (written by .github/workflows/release.yml with this script) equals
# the digest of its own checkout.
set -euo pipefail
cd "${1:-.}"
if command -v sha256sum >/dev/null 2>&1; then sha=(sha256sum); else sha=(shasum -a 256); fi
find Cargo.toml Cargo.lock src kernel-tables -type f -print0 | LC_ALL=C sort -z \
  | xargs -0 "${sha[@]}" | "${sha[@]}" | cut -c 1-16
