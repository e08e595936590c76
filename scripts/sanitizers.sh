#!/usr/bin/env bash
# The runtime, the CPU micro-kernels and their unit tests under the
# sanitizers. The runtime builds without LLVM or MLIR, so these builds are
# small (-DTFC_BUILD_COMPILER=OFF -DTFC_BUILD_RUNTIME_TESTS=ON):
#
#   build-asan/  -fsanitize=address,undefined: every runtime unit test
#                (TfcRuntimeTests, whose Corpus.* tests replay each file of
#                tests/unittests/Runtime/corpus through the parsers, with
#                the fuzz targets' checks) and the micro-kernels' tests
#                (TfcUKernelTests)
#   build-tsan/  -fsanitize=thread: the execution contexts' tests and their
#                stress test (Contexts.*, ContextStress.*: TfcContextTests,
#                which has just those of TfcRuntimeTests), with the
#                suppressions of scripts/tsan.supp
#
# UBSan's -fsanitize=function skips runtime/src/cuda
# (scripts/ubsan-ignorelist.txt): it calls the CUDA driver's C functions (the fake driver's, in the tests)
# through pointer types declared in C++ (tfc::cuda::CUctx_st ** for
# CUctx_st **), which agree in the ABI but not in the names the check
# compares.
#
# Both build directories are reused when present. Prints one summary line;
# exits non-zero on any failure. Called by scripts/test.sh after ctest.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LLVM_PREFIX="${TFC_LLVM_PREFIX:-/usr/lib/llvm-22}"
ASAN_BUILD="${TFC_ASAN_BUILD_DIR:-$ROOT/build-asan}"
TSAN_BUILD="${TFC_TSAN_BUILD_DIR:-$ROOT/build-tsan}"

start=$SECONDS
failures=()
fail() {
  failures+=("$1")
  echo "sanitizers: FAILED: $1" >&2
}

# configure DIR SANITIZE_FLAGS: a Ninja build of the runtime and its tests
# only, instrumented with SANITIZE_FLAGS. Reconfigures only when the flags
# below changed since the last configure of DIR.
configure() {
  local dir=$1 sanitize=$2
  local cflags="-O1 -gline-tables-only -fno-omit-frame-pointer $sanitize"
  local args=(
    -G Ninja
    -DCMAKE_BUILD_TYPE=
    -DCMAKE_C_COMPILER="$LLVM_PREFIX/bin/clang"
    -DCMAKE_CXX_COMPILER="$LLVM_PREFIX/bin/clang++"
    -DCMAKE_C_COMPILER_LAUNCHER=ccache
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
    "-DCMAKE_C_FLAGS=$cflags"
    "-DCMAKE_CXX_FLAGS=$cflags"
    "-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld $sanitize"
    "-DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld $sanitize"
    "-DCMAKE_MODULE_LINKER_FLAGS=-fuse-ld=lld $sanitize"
    -DTFC_BUILD_COMPILER=OFF
    -DTFC_BUILD_RUNTIME_TESTS=ON
    -DTFC_BUILD_RUNTIME_FIXTURES=ON
    # A static libstdc++ inside libtfcrt would bypass the sanitizers'
    # operator new/delete and their interceptors.
    -DTFC_RUNTIME_STATIC_LIBSTDCXX=OFF
    # Instrumented, the kernels take minutes to compile at -O3 (and at -O1
    # still two); at -O0 seconds, and their tests run about as fast.
    -DTFC_UKERNELS_OPT_LEVEL=-O0
  )
  local stamp="$dir/.tfc-sanitizers-config"
  if [[ -f "$dir/build.ninja" && -f "$stamp" &&
        "$(cat "$stamp")" == "${args[*]}" ]]; then
    return 0
  fi
  local log
  log="$(mktemp)"
  if ! cmake -S "$ROOT" -B "$dir" "${args[@]}" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
  printf '%s' "${args[*]}" >"$stamp"
}

# build DIR TARGET...: builds TARGETs in DIR, its output shown on failure.
build() {
  local dir=$1
  shift
  local log
  log="$(mktemp)"
  local t0=$SECONDS
  if ninja -C "$dir" "$@" >"$log" 2>&1; then
    echo "sanitizers: built $* in $(basename "$dir")/ ($((SECONDS - t0)) s)"
    rm -f "$log"
  else
    tail -n 80 "$log" >&2
    rm -f "$log"
    return 1
  fi
}

# run NAME COMMAND...: runs one test binary, its output kept in a log that
# is shown on failure.
run() {
  local name=$1
  shift
  local log
  log="$(mktemp)"
  local t0=$SECONDS
  if "$@" >"$log" 2>&1; then
    echo "sanitizers: $name: ok ($(tail -n 3 "$log" | grep -oE '[0-9]+ tests?' |
      head -n 1), $((SECONDS - t0)) s)"
  else
    tail -n 80 "$log" >&2
    fail "$name"
  fi
  rm -f "$log"
}

export ASAN_SYMBOLIZER_PATH="$LLVM_PREFIX/bin/llvm-symbolizer"
export TSAN_SYMBOLIZER_PATH="$LLVM_PREFIX/bin/llvm-symbolizer"
# Beyond ASan's defaults: leaks, initialisation order, stack use after
# return, and the strict checks of string functions' arguments.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:check_initialization_order=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# ASan + UBSan.
if configure "$ASAN_BUILD" "-fsanitize=address,undefined \
-fno-sanitize-recover=undefined \
-fsanitize-ignorelist=$ROOT/scripts/ubsan-ignorelist.txt"; then
  if build "$ASAN_BUILD" TfcRuntimeTests TfcUKernelTests; then
    run "asan+ubsan TfcRuntimeTests" "$ASAN_BUILD/bin/TfcRuntimeTests"
    run "asan+ubsan TfcUKernelTests" "$ASAN_BUILD/bin/TfcUKernelTests"
  else
    fail "asan+ubsan build"
  fi
else
  fail "asan+ubsan configure"
fi

# TSan: the concurrency tests.
if configure "$TSAN_BUILD" "-fsanitize=thread"; then
  if build "$TSAN_BUILD" TfcContextTests; then
    TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}:suppressions=$ROOT/scripts/tsan.supp" \
      run "tsan Contexts*:ContextStress*" "$TSAN_BUILD/bin/TfcContextTests" \
      '--gtest_filter=Contexts*:ContextStress*'
  else
    fail "tsan build"
  fi
else
  fail "tsan configure"
fi

if ((${#failures[@]})); then
  echo "sanitizers: FAILED (${failures[*]}) in $((SECONDS - start)) s"
  exit 1
fi
echo "sanitizers: PASSED (asan+ubsan: runtime + ukernel tests, corpus;" \
  "tsan: contexts) in $((SECONDS - start)) s"
