#!/usr/bin/env bash
# Set-up, then the main job: fuse the example layers, compile a real model
# (all-MiniLM-L6-v2 from its config.json and model.safetensors), embed a few
# sentences, time the fused against the unfused build, and compile the model
# for NVIDIA GPUs (PTX checked by ptxas; running it needs a GPU).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${TFC_BUILD_DIR:-$ROOT/build}"
BIN="$BUILD/bin"
bash "$ROOT/scripts/setup.sh"
# ccache keys on paths relative to the checkout (scripts/test.sh).
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=true
ninja -C "$BUILD" tfc-opt tfc-compile tfc-run tfc_ukernels ptx_cuda
python3 -c "import tokenizers" 2>/dev/null || python3 -m pip install -q tokenizers
MODEL="$(bash "$ROOT/scripts/install-model.sh")"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

echo
echo "== 1. Fusion: a BERT-style encoder layer written as an exporter writes it"
echo "   before: $(grep -c 'tosa\.' "$ROOT/examples/bert-layer/bert_layer.mlir") TOSA ops"
"$BIN/tfc-opt" "$ROOT/examples/bert-layer/bert_layer.mlir" --transformer-fuse \
  > "$WORK/bert_fused.mlir"
echo "   after --transformer-fuse: $(grep -c 'tosa\.' "$WORK/bert_fused.mlir") TOSA ops and"
grep -o 'transformer\.[a-z_]*[^:]*' "$WORK/bert_fused.mlir" | sed 's/^/     /'
echo "   GPT-style causal layer after --transformer-fuse:"
"$BIN/tfc-opt" "$ROOT/examples/gpt-layer/gpt_layer.mlir" --transformer-fuse |
  grep -o 'transformer\.[a-z_]*[^:]*' | sed 's/^/     /'

echo
echo "== 2. all-MiniLM-L6-v2 ($MODEL)"
SEQ=128
start=$(date +%s.%N)
"$BIN/tfc-compile" --hf "$MODEL" --batch 4 --seq-len $SEQ -o "$WORK/minilm4.so"
echo "   compile (config.json to .so, fused): $(echo "$(date +%s.%N) - $start" | bc) s"
"$BIN/tfc-compile" --hf "$MODEL" --batch 4 --seq-len $SEQ --no-fusion \
  -o "$WORK/minilm4_unfused.so"
python3 "$ROOT/examples/minilm/embed.py" "$MODEL" "$WORK/minilm4.so" \
  "$BIN/../lib/libtfcrt.so" $SEQ \
  "A compiler turns a model into machine code." \
  "tfc compiles Transformer models ahead of time." \
  "The cat sat on the warm windowsill all afternoon." \
  "A kitten was sleeping in the sun by the window."
echo "   From Python (the tfc package, python/; pip install ./python installs it):"
PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}" TFC_COMPILE="$BIN/tfc-compile" \
  TFC_RUNTIME_LIB="$BUILD/lib/libtfcrt.so" python3 - "$MODEL" "$WORK" $SEQ <<'PY'
import os, sys, time
import numpy as np
import tfc
model_dir, work, seq = sys.argv[1], sys.argv[2], int(sys.argv[3])
ids = np.full((4, seq), 1000, np.int64)
mask = np.ones_like(ids)
start = time.perf_counter()
with tfc.compile(model_dir, batch=4, seq_len=seq) as m:  # + model.safetensors
    took = time.perf_counter() - start
    emb, = m.run(input_ids=ids, attention_mask=mask)
with tfc.Model(os.path.join(work, "minilm4.so"),
               weights=os.path.join(model_dir, "model.safetensors")) as cli:
    ref, = cli.run(ids, mask)
print("   tfc.compile(MODEL, batch=4, seq_len=%d) in %.1f s, Model.run: %s "
      "embeddings, max difference from the tfc-compile build %.1e" %
      (seq, took, list(emb.shape), np.max(np.abs(emb - ref))))
PY

echo
echo "== 3. Whole model, batch 4, seq $SEQ: fused against unfused (same run)"
python3 -c "import numpy as np; np.save('$WORK/ids.npy', np.full((4,$SEQ), 1000, np.int64)); np.save('$WORK/mask.npy', np.ones((4,$SEQ), np.int64))"
for build in minilm4 minilm4_unfused; do
  "$BIN/tfc-run" "$WORK/$build.so" --weights "$MODEL/model.safetensors" \
    --input "$WORK/ids.npy" --input "$WORK/mask.npy" --output "$WORK/out.npy" \
    --warmup 2 --repeat 10
done

echo
echo "== 3b. One library for every batch and every length up to $SEQ (--batch 1,4 --seq-len 16,32,64,$SEQ)"
"$BIN/tfc-compile" --hf "$MODEL" --batch 1,4 --seq-len 16,32,64,$SEQ \
  -o "$WORK/minilm_shapes.so"
# The sentences padded to the longest of them only; the runtime runs the
# batch as the smallest build that holds it.
python3 "$ROOT/examples/minilm/embed.py" "$MODEL" "$WORK/minilm_shapes.so" \
  "$BIN/../lib/libtfcrt.so" "upto=$SEQ" \
  "A compiler turns a model into machine code." \
  "tfc compiles Transformer models ahead of time." \
  "The cat sat on the warm windowsill all afternoon." \
  "A kitten was sleeping in the sun by the window."
echo "   12 tokens: 4 sentences (12 runs as 16), 1 sentence, 6 sentences (4 + 2 as 4)"
for B in 4 1 6; do
  python3 -c "import numpy as np; np.save('$WORK/ids12.npy', np.full(($B,12), 1000, np.int64)); np.save('$WORK/mask12.npy', np.ones(($B,12), np.int64))"
  "$BIN/tfc-run" "$WORK/minilm_shapes.so" --weights "$MODEL/model.safetensors" \
    --input "$WORK/ids12.npy" --input "$WORK/mask12.npy" --output "$WORK/out.npy" \
    --warmup 2 --repeat 10
done

echo
echo "== 4. The same model for NVIDIA GPUs (--target=nvptx, sm_90a: H100, H200)"
if [[ -x /usr/local/cuda/bin/ptxas ]]; then
  "$BIN/tfc-compile" --hf "$MODEL" --batch 4 --seq-len $SEQ --target=nvptx \
    --emit=ptx -o "$WORK/minilm4.ptx"
  echo "   $(grep -c '^.visible .entry' "$WORK/minilm4.ptx") kernels in one PTX module, among them:"
  /usr/local/cuda/bin/ptxas -arch=sm_90a -v "$WORK/minilm4.ptx" \
    -o "$WORK/minilm4.cubin" 2>&1 |
    awk '/Compiling entry function/ { name = $7; gsub("\047", "", name) }
         /Used [0-9]+ registers/ && name ~ /^(attention|layer_norm)_/ &&
           !seen[substr(name, 1, 9)]++ {
           smem = $NF == "smem" ? ", " $(NF-2) " bytes of shared memory" : ""
           print "     " name " (f32): " $5 " registers" smem }'
  echo "   (tfc-compile --target=nvptx -o model.so embeds the cubin; tfc-run runs it"
  echo "   where a CUDA driver is: scripts/device-check.sh, docs/GPU.md)"
  echo "   Without a GPU: causal f16 attention (1x4x128x64) built for the GPU with"
  echo "   its PTX embedded, run by the PTX interpreter of the test CUDA driver,"
  echo "   against the CPU build:"
  T="tensor<1x4x128x64xf16>"
  cat > "$WORK/attn.mlir" <<MLIR
func.func @main(%q: $T, %k: $T, %v: $T) -> $T {
  %o = transformer.attention %q, %k, %v {is_causal} : $T, $T, $T -> $T
  return %o : $T
}
MLIR
  python3 -c "import numpy as np, sys; r = np.random.default_rng(0)
for n in 'qkv': np.save(sys.argv[1] + '/' + n + '.npy', r.standard_normal((1, 4, 128, 64)).astype(np.float16))" "$WORK"
  io=(--input "$WORK/q.npy" --input "$WORK/k.npy" --input "$WORK/v.npy")
  "$BIN/tfc-compile" "$WORK/attn.mlir" -o "$WORK/attn_cpu.so" 2>/dev/null
  "$BIN/tfc-run" "$WORK/attn_cpu.so" "${io[@]}" --output "$WORK/o_cpu.npy"
  # The default (sm_90a: wgmma on TMA tiles, two warpgroups per block, the
  # fastest on the H200), mma.sync (sm_90's default), wgmma on cp.async
  # tiles, and a producer warpgroup.
  for flags in "" "--gpu-arch=sm_90" "--gpu-tma=false --gpu-wgmma-warpgroups=1" \
    "--gpu-tma-producer"; do
    "$BIN/tfc-compile" "$WORK/attn.mlir" -o "$WORK/attn_gpu.so" --target=nvptx \
      --gpu-binary=ptx $flags 2>/dev/null
    PTXEMU_STATS=1 TFC_CUDA_DRIVER="$BUILD/runtime/fixtures/ptx_cuda.so" \
      "$BIN/tfc-run" "$WORK/attn_gpu.so" "${io[@]}" --output "$WORK/o_gpu.npy" 2>&1 |
      sed -n 's/^ptxemu: \([^)]*)\).*/\1/p' | sed "s/^/     ${flags:-default build}: /"
    python3 -c "import numpy as np, sys; a, b = (np.load(sys.argv[1] + f).astype(np.float64) for f in ('/o_gpu.npy', '/o_cpu.npy'))
print('       GPU build vs CPU build: relative difference %.1e' % (np.linalg.norm(a - b) / np.linalg.norm(b)))" "$WORK"
  done
  echo "   Decode (f16, one query row, 8 query heads on 2 KV heads, 2048 keys): the"
  echo "   split-KV decode kernel (default; its blocks: KV heads x chunks of keys)"
  echo "   and the tiled kernel (a block per query head):"
  QT="tensor<1x8x1x128xf16>" KT="tensor<1x2x2048x128xf16>"
  cat > "$WORK/decode.mlir" <<MLIR
func.func @main(%q: $QT, %k: $KT, %v: $KT) -> $QT {
  %o = transformer.attention %q, %k, %v : $QT, $KT, $KT -> $QT
  return %o : $QT
}
MLIR
  python3 -c "import numpy as np, sys; r = np.random.default_rng(1)
for n, s in (('q', (1, 8, 1, 128)), ('k', (1, 2, 2048, 128)), ('v', (1, 2, 2048, 128))): np.save(sys.argv[1] + '/d' + n + '.npy', r.standard_normal(s).astype(np.float16))" "$WORK"
  io=(--input "$WORK/dq.npy" --input "$WORK/dk.npy" --input "$WORK/dv.npy")
  "$BIN/tfc-compile" "$WORK/decode.mlir" -o "$WORK/decode_cpu.so" 2>/dev/null
  "$BIN/tfc-run" "$WORK/decode_cpu.so" "${io[@]}" --output "$WORK/o_cpu.npy"
  for flags in "" "--gpu-decode-kernel=false"; do
    "$BIN/tfc-compile" "$WORK/decode.mlir" -o "$WORK/decode_gpu.so" \
      --target=nvptx --gpu-binary=ptx $flags 2>/dev/null
    PTXEMU_STATS=1 TFC_CUDA_DRIVER="$BUILD/runtime/fixtures/ptx_cuda.so" \
      "$BIN/tfc-run" "$WORK/decode_gpu.so" "${io[@]}" --output "$WORK/o_gpu.npy" 2>&1 |
      sed -n 's/^ptxemu: \([^:]*\): \([0-9]*\) warp-instructions.*/\1: \2 warp-instructions/p' |
      sed "s/^/     ${flags:-default build}: /"
    python3 -c "import numpy as np, sys; a, b = (np.load(sys.argv[1] + f).astype(np.float64) for f in ('/o_gpu.npy', '/o_cpu.npy'))
print('       GPU build vs CPU build: relative difference %.1e' % (np.linalg.norm(a - b) / np.linalg.norm(b)))" "$WORK"
  done
else
  echo "   skipped: no /usr/local/cuda/bin/ptxas on this machine"
fi

echo
echo "== 5. Decoders from config.json + model.safetensors (random weights):"
echo "   GPT-2, and LLaMA (grouped-query attention, rotary embeddings, RMSNorm)"
for family in gpt2 llama; do
  python3 "$ROOT/tests/Integration/CPU/$family.py" --write "$WORK/$family"
  "$BIN/tfc-compile" --hf "$WORK/$family" --batch 2 --seq-len 13 \
    -o "$WORK/$family.so" 2>&1 | sed "s/^/   $family: /"
done
python3 - "$ROOT" "$WORK" "$BIN" <<'PY'
import importlib, os, subprocess, sys
import numpy as np
root, work, bindir = sys.argv[1:4]
sys.path.append(os.path.join(root, "tests", "Integration", "CPU"))
import gpt2
for family in ("gpt2", "llama"):
    module = importlib.import_module(family)
    model = os.path.join(work, family)
    weights = gpt2.read_weights(model)
    ids = np.random.default_rng(0).integers(0, 101, (2, 13)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[1, 9:] = 0  # the second sequence is 9 tokens, right padded
    np.save(os.path.join(work, "gids.npy"), ids)
    np.save(os.path.join(work, "gmask.npy"), mask)
    subprocess.run([os.path.join(bindir, "tfc-run"),
                    os.path.join(work, family + ".so"),
                    "--weights", os.path.join(model, "model.safetensors"),
                    "--input", os.path.join(work, "gids.npy"), "--input",
                    os.path.join(work, "gmask.npy"), "--output",
                    os.path.join(work, "ghidden.npy")], check=True)
    got = np.load(os.path.join(work, "ghidden.npy")).astype(np.float64)
    ref = module.reference(module.CFG, weights, ids, mask)
    print("   %s: last hidden state %s, relative error %.1e against a "
          "float64 %s" % (family, list(got.shape),
                          np.linalg.norm(got - ref) / np.linalg.norm(ref),
                          family))
PY
echo "   ... and LLaMA decoding: the 13th token after a KV cache of 12 (--past-len 12)"
"$BIN/tfc-compile" --hf "$WORK/llama" --batch 2 --seq-len 1 --past-len 12 \
  -o "$WORK/llama_decode.so" 2>&1 | sed "s/^/   llama decode: /"
python3 - "$ROOT" "$WORK" "$BIN" <<'PY'
import os, subprocess, sys
import numpy as np
root, work, bindir = sys.argv[1:4]
sys.path.append(os.path.join(root, "tests", "Integration", "CPU"))
import gpt2, llama
model = os.path.join(work, "llama")
weights = gpt2.read_weights(model)
ids = np.random.default_rng(0).integers(0, 101, (2, 13)).astype(np.int64)
mask = np.ones_like(ids)
mask[1, 9:] = 0
kv = []
ref = llama.reference(llama.CFG, weights, ids, mask, kv)
inputs = [ids[:, 12:], mask]
for k, v in kv:  # the cache of the first 12 tokens, from the reference
    inputs += [k[:, :, :12].astype(np.float32), v[:, :, :12].astype(np.float32)]
cmd = [os.path.join(bindir, "tfc-run"), os.path.join(work, "llama_decode.so"),
       "--weights", os.path.join(model, "model.safetensors")]
for i, x in enumerate(inputs):
    np.save(os.path.join(work, "dec_in%d.npy" % i), x)
    cmd += ["--input", os.path.join(work, "dec_in%d.npy" % i)]
outs = [os.path.join(work, "dec_out%d.npy" % i) for i in range(1 + 2 * len(kv))]
for p in outs:
    cmd += ["--output", p]
subprocess.run(cmd, check=True)
got = np.load(outs[0]).astype(np.float64)
print("   llama decode: hidden state %s, relative error %.1e; the returned "
      "cache holds %d tokens" % (list(got.shape),
                                 np.linalg.norm(got - ref[:, 12:]) /
                                 np.linalg.norm(ref[:, 12:]),
                                 np.load(outs[1]).shape[2]))
PY
echo "   ... and LLaMA generating 8 tokens greedily: a prefill build, then one"
echo "   step build over a 16-slot cache (--position-ids --present=new"
echo "   --output=logits), the cache kept by the caller"
python3 "$ROOT/tests/Integration/CPU/generate.py" "$BIN" "$WORK/generate" 1 |
  grep -E "^generated|passed" | sed "s/^/   llama generate: /"

echo
echo "== 6. The Transformer of \"Attention Is All You Need\" (the base model: 6 + 6"
echo "   layers, d_model 512, 8 heads, d_ff 2048, shared embeddings, post-LN) as a"
echo "   Marian directory with random weights (examples/transformer-base/: its"
echo "   README walks the paper's parts through the fused IR)"
TFC_PY=(env "PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
  "TFC_COMPILE=$BIN/tfc-compile" "TFC_RUNTIME_LIB=$BUILD/lib/libtfcrt.so")
python3 "$ROOT/examples/transformer-base/make_model.py" "$WORK/base"
TB=(--hf "$WORK/base" --batch 1 --seq-len 32 --decoder-seq-len 32 --output=logits)
start=$(date +%s.%N)
"$BIN/tfc-compile" "${TB[@]}" -o "$WORK/base.so" 2>&1 | sed 's/^/   /'
echo "   CPU: base.so (32 source and 32 target tokens, logits) in" \
  "$(printf %.1f "$(echo "$(date +%s.%N) - $start" | bc)") s; a forward pass:"
python3 -c "import numpy as np, sys; r = np.random.default_rng(0)
for n in ('src', 'dec'): np.save(sys.argv[1] + '/' + n + '.npy', r.integers(2, 3999, (1, 32)))
np.save(sys.argv[1] + '/srcmask.npy', np.ones((1, 32), np.int64))" "$WORK"
"$BIN/tfc-run" "$WORK/base.so" --weights "$WORK/base/model.safetensors" \
  --input "$WORK/src.npy" --input "$WORK/srcmask.npy" --input "$WORK/dec.npy" \
  --output "$WORK/logits.npy" --warmup 1 --repeat 5 | sed 's/^/   /'
if [[ -x /usr/local/cuda/bin/ptxas ]]; then
  "$BIN/tfc-compile" "${TB[@]}" --target=nvptx --emit=ptx -o "$WORK/base.ptx" 2>&1 |
    sed 's/^/   /'
  /usr/local/cuda/bin/ptxas -arch=sm_90a "$WORK/base.ptx" -o "$WORK/base.cubin"
  echo "   GPU (--target=nvptx): $(grep -c '^.visible .entry' "$WORK/base.ptx")" \
    "kernels in one PTX module, assembled by ptxas for sm_90a"
else
  echo "   GPU: skipped: no /usr/local/cuda/bin/ptxas on this machine"
fi
echo "   Beam search with 4 beams through tfc.Generator (the Python API): 2"
echo "   sources of 32 ids (the second 24 and padding), up to 32 new ids:"
"${TFC_PY[@]}" python3 "$ROOT/examples/transformer-base/translate.py" \
  "$WORK/base" | sed 's/^/     /'

echo
echo "== 7. all-MiniLM-L6-v2's attention maps (--attention-maps: the attention"
echo "   probabilities as outputs), layers 0 and 5, for the sentences of section 2"
MAPS="$BUILD/demo/attention-maps"
rm -rf "$MAPS"
n=0
for sentence in "A compiler turns a model into machine code." \
  "tfc compiles Transformer models ahead of time." \
  "The cat sat on the warm windowsill all afternoon." \
  "A kitten was sleeping in the sun by the window."; do
  n=$((n + 1))
  echo "   \"$sentence\":"
  "${TFC_PY[@]}" python3 "$ROOT/examples/attention-maps/plot.py" "$MODEL" \
    "$MAPS/sentence$n" --text "$sentence" --layers 0,5 | sed 's/^/     /'
done
echo "   e.g. $MAPS/sentence3/attentions.5.head0.png (queries down, keys across)"
