#!/usr/bin/env bash
# Re-exports the ONNX models of tests/Importer/ONNX/Inputs/models with
# PyTorch's two exporters (tests/Importer/ONNX/Inputs/export_models.py).
# The tests use the committed files and need only onnx and onnxruntime;
# this script, run by hand when the exported set changes, installs PyTorch,
# transformers and onnxscript into a virtual environment of its own
# ($TFC_ONNX_VENV, default build/onnx-venv).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${TFC_ONNX_VENV:-$ROOT/build/onnx-venv}"
if [[ ! -x "$VENV/bin/python" ]]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/python" -c "import torch, transformers, onnxscript, onnx" \
  2>/dev/null ||
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    torch transformers onnxscript onnx onnxruntime
exec "$VENV/bin/python" "$ROOT/tests/Importer/ONNX/Inputs/export_models.py" "$@"
