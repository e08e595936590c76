#!/usr/bin/env bash
# Installs the peers of the MiniLM benchmark (bench/minilm/run.py). For the
# bench only, not for CI. Idempotent; prints the venv's python on stdout.
#
#   PY=$(bash bench/minilm/setup_peers.sh)
#
# What it installs (the combination that installs on Debian 12 without the
# GBs of CUDA wheels PyPI's default torch pulls in; same recipe as
# tests/fixtures/minilm/README.md):
#   - Debian: python3-torch (1.13.1, CPU), python3-sklearn, python3-venv, time
#   - a venv with system site packages, $BENCH_VENV (default bench/.venv,
#     gitignored) with: transformers 4.40.2, tokenizers <0.20, pillow,
#     sentence-transformers 2.7.0 (--no-deps), onnx (for torch.onnx.export),
#     onnxruntime (CPU, PyPI), onnx_ir (for onnxruntime's weight-only
#     quantizer, bench/decoders/run.py --quantize), matplotlib (the plots of
#     bench/plots/plot.py). numpy is pinned <2: Debian's torch is built
#     against numpy 1.x.
#   - OpenBLAS for PyTorch: Debian's python3-torch does its GEMMs through
#     libblas.so.3, which is netlib's reference BLAS unless an optimised one
#     is installed (about 50x slower for this model). Installing
#     libopenblas0-* would switch the system-wide libblas.so.3 alternative,
#     so instead the .deb of libopenblas0-openmp is unpacked into
#     $VENV/openblas/ (apt-get download + dpkg -x; nothing in the system
#     changes) and run.py puts it on the PyTorch process's LD_LIBRARY_PATH.
#   - the model (scripts/install-model.sh).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
VENV="${BENCH_VENV:-$ROOT/bench/.venv}"
SYSPY=/usr/bin/python3           # Debian's python: the one python3-torch is for

log() { echo "setup_peers: $*" >&2; }

need_apt=()
for p in python3-torch python3-sklearn python3-venv time; do
  dpkg -s "$p" >/dev/null 2>&1 || need_apt+=("$p")
done
if ((${#need_apt[@]})); then
  log "apt-get install ${need_apt[*]}"
  SUDO=; [[ $(id -u) == 0 ]] || SUDO=sudo
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >&2
fi

if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating $VENV"
  "$SYSPY" -m venv --system-site-packages "$VENV" >&2
fi
PY="$VENV/bin/python"
PIP=("$PY" -m pip install --quiet --disable-pip-version-check)

CONSTRAINTS=$(mktemp); trap 'rm -f "$CONSTRAINTS"' EXIT
echo "numpy<2" > "$CONSTRAINTS"

if ! "$PY" - <<'PY' 2>/dev/null
import transformers, tokenizers, sentence_transformers, onnx, onnxruntime, PIL
import onnx_ir, matplotlib
assert transformers.__version__ == "4.40.2"
assert sentence_transformers.__version__ == "2.7.0"
PY
then
  log "pip install transformers, tokenizers, sentence-transformers, onnx, onnxruntime, onnx_ir, matplotlib"
  "${PIP[@]}" -c "$CONSTRAINTS" "transformers==4.40.2" "tokenizers<0.20" pillow >&2
  "${PIP[@]}" --no-deps "sentence-transformers==2.7.0" >&2
  "${PIP[@]}" -c "$CONSTRAINTS" onnx onnxruntime onnx_ir matplotlib >&2
fi

OB="$VENV/openblas/openblas-openmp"
if [[ ! -e "$OB/libblas.so.3" ]]; then
  log "fetching libopenblas0-openmp into $VENV/openblas"
  tmp=$(mktemp -d); chmod 755 "$tmp"
  (cd "$tmp" && apt-get download libopenblas0-openmp >&2 2>/dev/null) ||
    { SUDO=; [[ $(id -u) == 0 ]] || SUDO=sudo; $SUDO apt-get update -qq >&2; (cd "$tmp" && apt-get download libopenblas0-openmp >&2); }
  dpkg -x "$tmp"/libopenblas0-openmp_*.deb "$tmp/x"
  mkdir -p "$VENV/openblas"
  cp -a "$tmp/x/usr/lib/x86_64-linux-gnu/openblas-openmp" "$VENV/openblas/"
  rm -rf "$tmp"
fi
LD_LIBRARY_PATH="$OB" ldd /usr/lib/python3/dist-packages/torch/lib/libtorch_cpu.so | grep -q "$OB/libblas.so.3" ||
  { log "PyTorch does not pick up $OB/libblas.so.3"; exit 1; }

"$PY" - <<'PY' >&2
import numpy, torch, transformers, tokenizers, sentence_transformers, onnx, onnxruntime
print("setup_peers: numpy", numpy.__version__, "| torch", torch.__version__,
      "| transformers", transformers.__version__, "| tokenizers", tokenizers.__version__,
      "| sentence-transformers", sentence_transformers.__version__,
      "| onnx", onnx.__version__, "| onnxruntime", onnxruntime.__version__,
      onnxruntime.get_available_providers())
PY
bash "$ROOT/scripts/install-model.sh" >/dev/null
echo "$PY"
