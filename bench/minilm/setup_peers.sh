#!/usr/bin/env bash
# Installs the peers of tfc's CPU benchmarks (bench/minilm/run.py,
# bench/decoders/run.py, bench/onnx/run.py, bench/plots/measure.sh). For the
# bench only, not for CI. Idempotent; prints the venv's python on stdout.
#
#   PY=$(bash bench/minilm/setup_peers.sh)
#
# What it installs:
#   - Debian: python3-venv, time (/usr/bin/time -v measures peak RSS);
#   - a venv of its own (no system site packages), $BENCH_VENV (default
#     bench/.venv, gitignored), with PyPI's current releases of: torch (its
#     x86-64 wheel brings its own BLAS, MKL, and the CUDA wheels, which the
#     CPU benchmarks leave unused), transformers, sentence-transformers,
#     onnx, onnxscript (torch.onnx.export's dynamo exporter),
#     onnxruntime (CPU), onnx_ir (onnxruntime's weight-only quantizer,
#     bench/decoders/run.py --quantize), matplotlib (bench/plots/plot.py),
#     numpy 2;
#   - the model (scripts/install-model.sh).
# A later run installs only what is missing: the versions stay those of the
# first run (the measurements record them); remove the venv to take newer
# ones. A venv made by the earlier recipe (with system site packages, for
# Debian's python3-torch) is made anew.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
VENV="${BENCH_VENV:-$ROOT/bench/.venv}"
SYSPY=/usr/bin/python3

log() { echo "setup_peers: $*" >&2; }

need_apt=()
for p in python3-venv time; do
  dpkg -s "$p" >/dev/null 2>&1 || need_apt+=("$p")
done
if ((${#need_apt[@]})); then
  log "apt-get install ${need_apt[*]}"
  SUDO=; [[ $(id -u) == 0 ]] || SUDO=sudo
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >&2
fi

if grep -qs '^include-system-site-packages *= *true' "$VENV/pyvenv.cfg"; then
  log "$VENV uses the system's site packages (Debian's torch): making it anew"
  rm -rf "$VENV"
fi
if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating $VENV"
  "$SYSPY" -m venv "$VENV" >&2
fi
PY="$VENV/bin/python"

if ! "$PY" - "$VENV" <<'PY' 2>/dev/null
import os, sys
import numpy, torch, transformers, tokenizers, sentence_transformers
import onnx, onnxscript, onnxruntime, onnx_ir, matplotlib
venv = os.path.realpath(sys.argv[1])
assert os.path.realpath(torch.__file__).startswith(venv + os.sep), torch.__file__
assert int(numpy.__version__.split(".")[0]) >= 2
assert int(torch.__version__.split(".")[0]) >= 2
PY
then
  log "pip install torch transformers sentence-transformers onnx onnxscript onnxruntime onnx_ir matplotlib numpy>=2 (several GB: torch's wheels)"
  "$PY" -m pip install --quiet --disable-pip-version-check \
    torch transformers sentence-transformers onnx onnxscript onnxruntime \
    onnx_ir matplotlib "numpy>=2" >&2
fi

"$PY" - <<'PY' >&2
import numpy, torch, transformers, tokenizers, sentence_transformers
import onnx, onnxscript, onnxruntime
print("setup_peers: numpy", numpy.__version__, "| torch", torch.__version__,
      "| transformers", transformers.__version__, "| tokenizers", tokenizers.__version__,
      "| sentence-transformers", sentence_transformers.__version__,
      "| onnx", onnx.__version__, "| onnxscript", onnxscript.__version__,
      "| onnxruntime", onnxruntime.__version__, onnxruntime.get_available_providers())
PY
bash "$ROOT/scripts/install-model.sh" >/dev/null
echo "$PY"
