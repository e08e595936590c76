#!/usr/bin/env bash
# The real all-MiniLM-L6-v2 (when scripts/install-model.sh has installed it):
# import at batch 1 and 8, seq 128; check the signature; evaluate the batch-8
# graph with numpy and compare with the PyTorch fixtures in
# tests/fixtures/minilm. The last line is "minilm: OK" or "minilm: SKIPPED".
#   minilm.sh SRC_ROOT TMP_DIR
set -euo pipefail
src=$1 tmp=$2
mkdir -p "$tmp"
if ! dir=$(bash "$src/scripts/install-model.sh" --check); then
  echo "minilm: SKIPPED: all-MiniLM-L6-v2 is not installed (bash scripts/install-model.sh)"
  exit 0
fi
tfc-import --hf "$dir" --batch 1 --seq-len 128 -o "$tmp/b1.mlir"
grep -q 'func.func @main(%arg0: tensor<1x128xi64> {tfc.name = "input_ids", tfc.role = "input"}, %arg1: tensor<1x128xi64> {tfc.name = "attention_mask", tfc.role = "input"}, %arg2: tensor<30522x384xf32> {tfc.name = "embeddings.word_embeddings.weight", tfc.role = "weight"}' "$tmp/b1.mlir"
grep -q -- '-> tensor<1x384xf32>' "$tmp/b1.mlir"
weights=$(grep -o 'tfc.role = "weight"' "$tmp/b1.mlir" | wc -l)
echo "weights: $weights"
[[ $weights == 101 ]]
tfc-import --hf "$dir" --batch 8 --seq-len 128 --mlir-print-op-generic -o "$tmp/b8.mlir"
python3 -m tfc_testing.tosa_eval fixture "$tmp/b8.mlir" "$dir" "$src/tests/fixtures/minilm"
echo "minilm: OK"
