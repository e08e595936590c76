#!/usr/bin/env bash
# Checks and times tfc's GPU (NVPTX) builds on a lent H200. docs/device-check.md
# says how and when; in short:
#
#   scripts/device-check.sh prepare   HERE: build tfc, compile every model of
#                                     the check into .device/ (ignored), with
#                                     its manifest and a prebuilt runtime
#   scripts/device-check.sh run       THERE, as one call of the device tool:
#                                     command "scripts/device-check.sh run",
#                                     carry [".device"], timeout_s 480
#   scripts/device-check.sh dry-run   HERE: the same driver on --target=cpu
#                                     models with the CPU PyTorch of
#                                     bench/.venv (no GPU needed)
#   scripts/device-check.sh profile   THERE: Nsight Compute's counters for
#                                     a few builds (scripts/device/ncu_profile.py)
#   scripts/device-check.sh emulate   HERE: the numerics of the GPU builds
#                                     (PTX embedded) on the PTX interpreter
#                                     of the fake CUDA driver, against the
#                                     CPU PyTorch (no GPU; no timing)
#
# Environment: TFC_BIN (use this bin/ with tfc-compile and tfc-run instead of
# building build/), TFC_BUILD_DIR (default build/), TFC_GPU_ARCH (--gpu-arch
# for the nvptx builds, e.g. sm_90a; default: tfc-compile's), DEVICE_CHECK_BUDGET
# (seconds for the whole `run`, runtime build included; default 330),
# DEVICE_CHECK_SEED (reuse a printed seed), DEVICE_CHECK_PHASES (a rerun's
# parts of the check, e.g. "timing,gemm"; check.py --help lists them),
# DEVICE_CHECK_GENERATE_BUDGET (the generation part's share, default 200 s),
# JOBS (parallel compiles, default 1).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HERE="$ROOT/scripts/device"
BUILD="${TFC_BUILD_DIR:-$ROOT/build}"
TMP="${TMPDIR:-/tmp}"
RT_BUILD="$TMP/tfc-device-runtime"   # the runtime, built standalone
# The device tool carries 64 MiB at most: the working tree (tracked files and
# untracked ones git does not ignore) and .device together. .device gets what
# the tree leaves, less 1 MiB of margin.
CARRY_BYTES=$((64 << 20))

log() { echo "device-check: $*"; }

# tfc-compile and tfc-run, built if needed; sets BIN.
build_tfc() {
  if [[ -n "${TFC_BIN:-}" ]]; then
    BIN="$TFC_BIN"
  else
    bash "$ROOT/scripts/setup.sh"
    ninja -C "$BUILD" tfc-compile tfc-run
    BIN="$BUILD/bin"
  fi
  [[ -x "$BIN/tfc-compile" && -x "$BIN/tfc-run" ]] ||
    { log "no tfc-compile/tfc-run in $BIN"; exit 1; }
}

# Builds libtfcrt + tfc-run without LLVM into $RT_BUILD (standalone
# runtime/, or the whole tree with the compiler off); sets RT_RUN, RT_LIB.
build_runtime() {
  local conf=(-G Ninja -DCMAKE_BUILD_TYPE=Release)
  RT_RUN="" RT_LIB=""
  if ! { [[ -f "$RT_BUILD/build.ninja" ]] ||
         timeout 60 cmake -S "$ROOT/runtime" -B "$RT_BUILD" "${conf[@]}" ||
         { rm -rf "$RT_BUILD" &&
           timeout 60 cmake -S "$ROOT" -B "$RT_BUILD" "${conf[@]}" \
             -DTFC_BUILD_COMPILER=OFF; }; } >"$TMP/tfc-device-cmake.log" 2>&1
  then
    log "runtime: cmake failed: $(tail -n 3 "$TMP/tfc-device-cmake.log" | tr '\n' ' ')"
    rm -rf "$RT_BUILD"
    return 1
  fi
  if ! timeout 150 ninja -C "$RT_BUILD" tfcrt tfc-run >"$TMP/tfc-device-ninja.log" 2>&1; then
    log "runtime: ninja failed: $(grep -m 3 -E 'error|FAILED' "$TMP/tfc-device-ninja.log" | tr '\n' ' ')"
    return 1
  fi
  # The newest, should the build's layout have changed.
  RT_RUN=$(find "$RT_BUILD" -name tfc-run -type f -perm -u+x -printf '%T@ %p\n' |
    sort -n | tail -n 1 | cut -d' ' -f2-)
  RT_LIB=$(find "$RT_BUILD" -name 'libtfcrt.so*' -type f -printf '%T@ %p\n' |
    sort -n | tail -n 1 | cut -d' ' -f2-)
  [[ -n "$RT_RUN" && -n "$RT_LIB" ]]
}

# prepare DIR TARGET [--small]
prepare() {
  local dir="$1" target="$2"; shift 2
  build_tfc
  mkdir -p "$dir"
  local rc=0
  python3 "$HERE/prepare.py" --tfc-compile "$BIN/tfc-compile" --out "$dir" \
    --target "$target" --gpu-arch "${TFC_GPU_ARCH:-}" \
    --jobs "${JOBS:-1}" "$@" || rc=$?
  ((rc == 0 || rc == 2)) || exit $rc
  # The runtime travels as source and is built there; these binaries are the
  # fallback if that build fails.
  rm -rf "$dir/bin" && mkdir -p "$dir/bin"
  if build_runtime; then
    cp -L "$RT_RUN" "$RT_LIB" "$dir/bin/"
    log "prebuilt runtime (standalone build) in $dir/bin"
  else
    cp -L "$BIN/tfc-run" "$dir/bin/"
    cp -L "$(dirname "$BIN")"/lib/libtfcrt.so* "$dir/bin/"
    log "prebuilt runtime copied from $BIN in $dir/bin"
  fi
  # What travels goes as one xz archive (the builds compress about 15x);
  # `run` and `profile` unpack it there.
  if [[ "$target" != cpu ]]; then
    rm -f "$dir/packed.tar.xz"
    python3 -c 'import sys, tarfile
with tarfile.open(sys.argv[1], "w:xz") as t:
    for name in sys.argv[3:]:
        t.add(sys.argv[2] + "/" + name, name)' \
      "$dir/packed.tar.xz" "$dir" models bin
    rm -rf "$dir/models" "$dir/bin"
    log "models/ and bin/ packed into $dir/packed.tar.xz"
  fi
  local bytes tree limit
  bytes=$(du -sb "$dir" | cut -f1)
  # (a file deleted but still in the index has no size: stat fails on it)
  tree=$(cd "$ROOT" && { git ls-files -z --cached --others --exclude-standard |
    xargs -0 stat -c %s 2>/dev/null || true; } | awk '{s += $1} END {print s + 0}')
  limit=$((CARRY_BYTES - tree - (1 << 20)))
  log "$dir holds $((bytes >> 20)).$(( (bytes & 0xFFFFF) * 10 >> 20 )) MiB" \
    "(limit $((limit >> 20)).$(( (limit & 0xFFFFF) * 10 >> 20 )) MiB: 64 less" \
    "the $((tree >> 10)) KiB of the working tree, less 1 MiB)"
  # Only what travels must fit: the dry run's CPU models (each with the
  # micro-kernels linked in) stay here.
  if ((bytes > limit)); then
    [[ "$target" == cpu ]] || { log "too large to carry"; exit 1; }
    log "larger than the device tool carries; fine for a dry run, which stays here"
  fi
  ((rc == 0)) || log "some models did not compile (listed above); the run reports them as FAIL"
  return 0
}

# unpack DIR: models/ and bin/ from DIR/packed.tar.xz (prepare's archive).
unpack() {
  local dir="$1"
  [[ -f "$dir/packed.tar.xz" ]] || return 0
  rm -rf "$dir/models" "$dir/bin"
  python3 -c 'import sys, tarfile
tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
    "$dir/packed.tar.xz" "$dir" || { log "cannot unpack $dir/packed.tar.xz"; exit 1; }
  log "unpacked models/ and bin/ from $dir/packed.tar.xz"
}

# runtime DIR: the runtime built here from source (fallback: DIR/bin); sets
# TFC_RUN and LD_LIBRARY_PATH (with DIR/lib where the models need it).
runtime() {
  local dir="$1" t0=$SECONDS
  if build_runtime && "$RT_RUN" --help >/dev/null 2>&1; then
    TFC_RUN="$RT_RUN"
    export LD_LIBRARY_PATH="$(dirname "$RT_LIB")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    log "runtime built from source in $((SECONDS - t0)) s: $TFC_RUN"
  else
    TFC_RUN="$dir/bin/tfc-run"
    export LD_LIBRARY_PATH="$dir/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    RT_LIB="$dir/bin/libtfcrt.so"
    log "runtime build failed: using the prebuilt $TFC_RUN"
  fi
  # The same library for the Python API (python/tfc: the generation).
  export TFC_RUNTIME_LIB="$RT_LIB"
  # Libraries the models link that this machine lacks (libomp, say): the
  # copies prepare put in DIR/lib.
  local model
  model=$(find "$dir/models" -name '*.so' | sort | head -n 1)
  if [[ -n "$model" ]] && timeout 30 ldd "$model" 2>&1 | grep -q 'not found'; then
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$dir/lib"
    log "models link libraries this machine lacks: adding $dir/lib"
    timeout 30 ldd "$model" 2>&1 | grep 'not found' || true
  fi
}

# check DIR OUT PYTHON: build the runtime (fallback: DIR/bin), then the
# numerics and timing driver. Runs on the device machine, and in the dry run.
check() {
  local dir="$1" out="$2" py="$3" start=$SECONDS
  log "$(date -u '+%Y-%m-%d %H:%M:%S UTC') on ${HOSTNAME:-?} ($(uname -m))"
  if command -v nvidia-smi >/dev/null; then
    timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit \
      --format=csv,noheader || log "nvidia-smi failed"
  else
    log "no nvidia-smi"
  fi
  [[ -f "$dir/manifest.json" ]] || {
    log "no $dir/manifest.json: run 'scripts/device-check.sh prepare' first, then carry [\".device\"]"
    return 1
  }
  runtime "$dir"
  local tfc_run="$TFC_RUN" model
  model=$(find "$dir/models" -name '*.so' | sort | head -n 1)
  [[ -z "$model" ]] || timeout 30 "$tfc_run" "$model" --describe 2>&1 |
    grep -E '^  device:|error:' || true
  local budget=$(( ${DEVICE_CHECK_BUDGET:-330} - (SECONDS - start) ))
  ((budget > 60)) || budget=60
  local rc=0
  PYTHONUNBUFFERED=1 timeout -k 10 $((budget + 60)) "$py" "$HERE/check.py" \
    --manifest "$dir/manifest.json" --tfc-run "$tfc_run" --out "$out" \
    --budget "$budget" ${DEVICE_CHECK_SEED:+--seed "$DEVICE_CHECK_SEED"} \
    ${DEVICE_CHECK_PHASES:+--phases "$DEVICE_CHECK_PHASES"} || rc=$?
  if [[ -n "${DRY_RUN:-}" ]]; then
    log "dry run: check.py's GPU-only branches, with stand-ins for CUDA"
    "$py" "$HERE/fake_gpu_test.py" --manifest "$dir/manifest.json" \
      --tfc-run "$tfc_run" || rc=1
  fi
  return $rc
}

cmd="${1:-}"
case "$cmd" in
  prepare)
    prepare "$ROOT/.device" nvptx
    log 'next, on the device: run tool, command "scripts/device-check.sh run", carry [".device"], timeout_s 480'
    ;;
  run)
    out="${OUT:-$ROOT/.device/out}"
    mkdir -p "$out"
    set -o pipefail
    rc=0
    { unpack "$ROOT/.device" && check "$ROOT/.device" "$out" python3; } 2>&1 |
      tee "$out/device-check.log" || rc=$?
    exit "$rc"
    ;;
  profile)
    # Nsight Compute's counters for a few builds (scripts/device/ncu_profile.py).
    out="${OUT:-$ROOT/.device/out}"
    mkdir -p "$out"
    set -o pipefail
    rc=0
    {
      [[ -f "$ROOT/.device/manifest.json" ]] || {
        log "no .device/manifest.json: run 'scripts/device-check.sh prepare' first"
        exit 1
      }
      unpack "$ROOT/.device"
      runtime "$ROOT/.device"
      PYTHONUNBUFFERED=1 python3 "$HERE/ncu_profile.py" \
        --manifest "$ROOT/.device/manifest.json" --tfc-run "$TFC_RUN" \
        --out "$out" --budget "${DEVICE_CHECK_BUDGET:-150}"
    } 2>&1 | tee "$out/profile.log" || rc=$?
    exit "$rc"
    ;;
  emulate)
    build_tfc
    [[ -n "${TFC_BIN:-}" ]] || ninja -C "$BUILD" ptx_cuda
    driver="$(dirname "$BIN")/runtime/fixtures/ptx_cuda.so"
    [[ -f "$driver" ]] || { log "no PTX-interpreting driver at $driver"; exit 1; }
    py="$ROOT/bench/.venv/bin/python"
    [[ -x "$py" ]] || py=$(bash "$ROOT/bench/minilm/setup_peers.sh")
    emu="$TMP/tfc-device-emu"
    rc=0
    python3 "$HERE/prepare.py" --tfc-compile "$BIN/tfc-compile" \
      --out "$emu/device" --target nvptx --gpu-binary ptx --numerics-only \
      --gpu-arch "${TFC_GPU_ARCH:-}" --jobs "${JOBS:-2}" || rc=$?
    ((rc == 0 || rc == 2)) || exit $rc
    set -o pipefail
    TFC_CUDA_DRIVER="$driver" PYTHONUNBUFFERED=1 "$py" "$HERE/check.py" \
      --manifest "$emu/device/manifest.json" --tfc-run "$BIN/tfc-run" \
      --out "$emu/out" --budget 3600 --emulated \
      ${DEVICE_CHECK_SEED:+--seed "$DEVICE_CHECK_SEED"} 2>&1 |
      tee "$emu/device-check.log" || rc=$?
    log "emulated check: exit $rc; table and log in $emu/out"
    exit "$rc"
    ;;
  dry-run)
    py="$ROOT/bench/.venv/bin/python"
    [[ -x "$py" ]] || py=$(bash "$ROOT/bench/minilm/setup_peers.sh")
    dry="$TMP/tfc-device-dry"
    prepare "$dry/device" cpu --small
    mkdir -p "$dry/out"
    set -o pipefail
    rc=0
    DRY_RUN=1 DEVICE_CHECK_BUDGET="${DEVICE_CHECK_BUDGET:-600}" \
      check "$dry/device" "$dry/out" "$py" 2>&1 | tee "$dry/out/device-check.log" || rc=$?
    log "dry run: exit $rc; table and log in $dry/out"
    exit "$rc"
    ;;
  *)
    sed -n '2,28p' "$0"
    exit 2
    ;;
esac
