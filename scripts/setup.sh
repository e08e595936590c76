#!/usr/bin/env bash
# Installs what tfc needs to build and test on a Debian 12 machine, then
# configures the build in build/. Safe to run repeatedly: it only installs
# what is missing and reconfigures only when needed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LLVM_PREFIX=/usr/lib/llvm-22

# The one list of Debian packages the project needs.
APT_PACKAGES=(
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools clang-22 lld-22
  libomp-22-dev libclang-rt-22-dev libdnnl-dev
  cmake ninja-build ccache libgtest-dev
  openmpi-bin libopenmpi-dev
  libonnx-dev libprotobuf-dev
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

# The test suite's Python, for whichever python3 is first on PATH: numpy
# (reference computations, .npy fixtures), onnx and onnxruntime (the ONNX
# importer's tests: ONNX Runtime as the reference; onnx pinned, since its
# node test cases, which backend.test counts, change with each release),
# matplotlib (the plots of bench/plots), mpi4py (the Python API's
# tensor-parallel tests; its wheel opens the Open MPI above).
ONNX_VERSION=1.23.2
python3 -c "import numpy, onnxruntime, matplotlib, onnx, mpi4py, sys
sys.exit(onnx.__version__ != '$ONNX_VERSION')" 2>/dev/null ||
  python3 -m pip install -q numpy "onnx==$ONNX_VERSION" onnxruntime matplotlib mpi4py

BUILD="${TFC_BUILD_DIR:-$ROOT/build}"
if [[ ! -f "$BUILD/build.ninja" ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER="$LLVM_PREFIX/bin/clang" \
    -DCMAKE_CXX_COMPILER="$LLVM_PREFIX/bin/clang++" \
    -DMLIR_DIR="$LLVM_PREFIX/lib/cmake/mlir" \
    -DLLVM_DIR="$LLVM_PREFIX/lib/cmake/llvm" \
    -DLLVM_EXTERNAL_LIT="$LLVM_PREFIX/bin/lit" \
    -DLLVM_USE_LINKER=lld \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
fi
