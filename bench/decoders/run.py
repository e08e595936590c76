#!/usr/bin/env python3
"""Decoders with random weights on the CPU: tfc fused, tfc unfused, PyTorch
eager and ONNX Runtime, measured in one run.

  bash bench/minilm/setup_peers.sh          # once: bench/.venv
  bench/.venv/bin/python bench/decoders/run.py [--family gpt2|llama|neox]
      [--threads 2] [--batch 1] [--seq-len 128] [--layers 12] [--rounds 5]
      [--runs 10] [--past-len P] [--quantize] [--bf16] [--tfc-batches B,...]

gpt2: GPT-2 small's shape (hidden 768, 12 heads, 12 blocks, vocabulary
50257). llama: a LLaMA of the same width (hidden 768, 12 query heads of 64
on 4 K/V heads, SwiGLU of 2048, vocabulary 32000, 12 blocks). Weights come
from transformers' own initialisation (seed 0): the arithmetic is the same
as a released checkpoint's, which cannot be downloaded here. neox:
Pythia-160M's shape (GPT-NeoX: hidden 768, 12 heads, 12 blocks, MLP of
3072, a quarter of each head turned by the rotary embedding, parallel
residuals, vocabulary 50304). Every system computes the model's last
hidden state (GPT2Model, LlamaModel, GPTNeoXModel) from int64
ids and an all-ones attention mask, with the same thread count.

--past-len P times one decode step instead: --seq-len new tokens (1 for
decoding) after a KV cache of P tokens, which PyTorch computes once from P
random tokens (its prefill) and every system then takes as input: tfc's
build with --past-len P (its outputs include the keys and values of all P +
S tokens) and PyTorch's model called with that cache (a transformers
DynamicCache, as generate() passes it) and ONNX Runtime's export of that
call (the cache as inputs, the new one as outputs). A second tfc build, "tfc
fused --present=new", returns the new token's keys and values only (for the
caller to write into its cache): its step reads the cache where it is
instead of copying it into the new one. --quantize adds "tfc fused
--quantize-weights=int8" and "=int4": the matmuls' weights quantized as the
kernels pack them (int8: a scale per output column; int4: per column and 128
rows), and each with "--quantize-activations=int8" (those matmuls'
activations quantized per row and 128 values, integer dot products); their
outputs differ from PyTorch's by the quantization (the last column says how
much). And ONNX Runtime's own weight-only int8 and int4 (MatMulNBits from
its MatMulNBitsQuantizer: symmetric, a scale per 128 weights along K),
computing in f32 ("accuracy level 0") and with its activations quantized to
int8 too (accuracy level 4, MLAS's int8 kernels). --bf16 adds "tfc fused
--dtype=bf16" and PyTorch eager on the model converted with
.to(torch.bfloat16); with --past-len both take the cache rounded to bf16
(and tfc's bf16 build also runs with --present=new). Each round runs every
system once as a fresh process (rotated order): 2 warm-up runs, then --runs
timed runs; latency = median of the round medians. tfc is timed by tfc-run
--repeat, the peers by perf_counter around each call (this file's `peer`
mode). The outputs are compared with PyTorch's.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "pylib"))
from tfc_testing.arrays import bf16_to_f32, f32_to_bf16  # noqa: E402


def model_class(family, head=False):
    """transformers' model of `family`, with `head` its LM head too."""
    import transformers
    names = {"gpt2": ("GPT2Model", "GPT2LMHeadModel"),
             "llama": ("LlamaModel", "LlamaForCausalLM"),
             "neox": ("GPTNeoXModel", "GPTNeoXForCausalLM")}
    return getattr(transformers, names[family][int(head)])


def make_model(d, family, layers, head=False):
    if os.path.exists(os.path.join(d, "model.safetensors")):
        return
    import torch
    from transformers import GPT2Config, GPTNeoXConfig, LlamaConfig
    torch.manual_seed(0)
    if family == "gpt2":
        cfg = GPT2Config(n_layer=layers)
    elif family == "neox":
        cfg = GPTNeoXConfig(hidden_size=768, intermediate_size=3072,
                            num_hidden_layers=layers, num_attention_heads=12,
                            vocab_size=50304, rotary_pct=0.25,
                            max_position_embeddings=2048)
    else:
        cfg = LlamaConfig(hidden_size=768, intermediate_size=2048,
                          num_hidden_layers=layers, num_attention_heads=12,
                          num_key_value_heads=4, vocab_size=32000,
                          max_position_embeddings=2048, rms_norm_eps=1e-6)
    model_class(family, head)(cfg).save_pretrained(d, safe_serialization=True)


def kv_cache(pairs):
    """transformers' DynamicCache holding `pairs`, (keys, values) by layer."""
    from transformers import DynamicCache
    return DynamicCache(pairs)


def kv_pairs(out):
    """The (keys, values) by layer of a model output's cache."""
    return [(layer.keys, layer.values) for layer in out.cache.layers]


def peer_environments():
    """The environment of the peers' processes, without thread settings
    (every system takes --threads), and PyTorch's (the same)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "KMP_BLOCKTIME",
                        "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    return env, env


def peer(a):
    import torch
    torch.set_num_threads(a.threads)
    ids = np.load(a.ids)
    past = [(torch.from_numpy(np.load(k)), torch.from_numpy(np.load(v)))
            for k, v in zip(a.past[0::2], a.past[1::2])] if a.past else None
    if past and a.system == "torch-bf16":
        past = [(k.to(torch.bfloat16), v.to(torch.bfloat16)) for k, v in past]
    past_len = past[0][0].shape[2] if past else 0
    mask = np.ones((ids.shape[0], past_len + ids.shape[1]), dtype=np.int64)
    if a.system in ("torch", "torch-bf16", "prefill"):
        m = model_class(a.family).from_pretrained(
            a.model, attn_implementation="eager")
        m.eval()
        if a.system == "torch-bf16":
            m = m.to(torch.bfloat16)
        ti, tm = torch.from_numpy(ids), torch.from_numpy(mask)
        if a.system == "prefill":
            # The KV cache of these tokens, one .npy per layer's keys and
            # values (the --out prefix).
            with torch.inference_mode():
                cache = kv_pairs(m(input_ids=ti, attention_mask=tm,
                                   use_cache=True))
            for l, (k, v) in enumerate(cache):
                np.save("%s%d_k.npy" % (a.out, l), k.numpy())
                np.save("%s%d_v.npy" % (a.out, l), v.numpy())
            return

        def call():
            with torch.inference_mode():
                if past is None:
                    return m(input_ids=ti,
                             attention_mask=tm)[0].float().numpy()
                return m(input_ids=ti, attention_mask=tm,
                         cache=kv_cache(past),
                         use_cache=True)[0].float().numpy()
    else:
        import onnxruntime as ort
        o = ort.SessionOptions()
        o.intra_op_num_threads = a.threads
        o.inter_op_num_threads = 1
        o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        s = ort.InferenceSession(a.onnx, o, providers=["CPUExecutionProvider"])

        feed = {"input_ids": ids, "attention_mask": mask}
        for i, f in enumerate(a.past):
            feed["past_%d_%s" % (i // 2, "kv"[i % 2])] = np.load(f)

        def call():
            return s.run(None, feed)[0]
    for _ in range(2):
        out = call()
    times = []
    for _ in range(a.runs):
        t0 = time.perf_counter()
        out = call()
        times.append((time.perf_counter() - t0) * 1e3)
    np.save(a.out, out)
    print("median %.4f ms" % statistics.median(times))


def export(family, model, onnx, batch, seq, past=()):
    """Exports the model's last hidden state for `seq` new tokens; with
    `past` (the cache's .npy files, keys and values by layer) the graph also
    takes the cache (inputs past_0_k, past_0_v, ...) and returns the new one
    after the hidden state, as tfc's --past-len build does."""
    import torch
    m = model_class(family).from_pretrained(
        model, attn_implementation="eager").eval()
    m.config.use_cache = bool(past)
    cache = [torch.from_numpy(np.load(p)) for p in past]
    ids = torch.zeros((batch, seq), dtype=torch.int64)
    mask = torch.ones((batch, (cache[0].shape[2] if cache else 0) + seq),
                      dtype=torch.int64)

    class Wrap(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, *flat):
            if not flat:
                return self.m(input_ids=input_ids,
                              attention_mask=attention_mask,
                              use_cache=False)[0]
            pairs = tuple(zip(flat[0::2], flat[1::2]))
            out = self.m(input_ids=input_ids, attention_mask=attention_mask,
                         cache=kv_cache(pairs), use_cache=True)
            return (out[0],) + tuple(t for kv in kv_pairs(out) for t in kv)
    names = ["past_%d_%s" % (i // 2, "kv"[i % 2]) for i in range(len(cache))]
    with torch.no_grad():
        torch.onnx.export(
            Wrap(m).eval(), (ids, mask) + tuple(cache), onnx,
            input_names=["input_ids", "attention_mask"] + names,
            output_names=["hidden"] + ["present_%d" % i
                                       for i in range(len(cache))],
            dynamo=True, opset_version=18)


def quantize_onnx(src, dst, bits, accuracy_level):
    """ONNX Runtime's weight-only quantization of `src` into `dst`: each
    MatMul with a constant weight becomes MatMulNBits (`bits` bits,
    symmetric, blocks of 128 along K)."""
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import \
        MatMulNBitsQuantizer
    q = MatMulNBitsQuantizer(onnx.load(src), bits=bits, block_size=128,
                             is_symmetric=True,
                             accuracy_level=accuracy_level)
    q.process()
    q.model.save_model_to_file(dst, use_external_data_format=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", nargs="?", default="bench")
    ap.add_argument("--family", choices=("gpt2", "llama", "neox"),
                    default="gpt2")
    ap.add_argument("--system")
    ap.add_argument("--model")
    ap.add_argument("--onnx")
    ap.add_argument("--ids")
    ap.add_argument("--out")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--tfc-batches",
                    help="the tfc builds' batch sizes (tfc-compile --batch "
                    "B1,B2,...; default: --batch): one library that runs "
                    "--batch as the smallest built size that holds it")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--past-len", type=int, default=0)
    ap.add_argument("--quantize", action="store_true")
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--past", nargs="*", default=[],
                    help="(peer) the cache's .npy files, keys and values "
                         "by layer")
    a = ap.parse_args()
    if a.mode == "peer":
        return peer(a)

    work = os.path.join(HERE, "work")
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "%s-random-%dl" % (a.family, a.layers))
    make_model(model, a.family, a.layers)
    b, s, past_len = a.batch, a.seq_len, a.past_len
    with open(os.path.join(model, "config.json")) as f:
        config = json.load(f)
    layers = config.get("num_hidden_layers", config.get("n_layer"))
    ids = np.random.default_rng(1).integers(
        0, config["vocab_size"], (b, past_len + s)).astype(np.int64)
    ids_p, mask_p = os.path.join(work, "ids.npy"), os.path.join(work, "mask.npy")
    np.save(ids_p, ids[:, past_len:])
    np.save(mask_p, np.ones_like(ids))
    tag = "%s_%dl_b%d_s%d" % (a.family, a.layers, b, s)
    if past_len:
        tag += "_past%d" % past_len
    env, torch_env = peer_environments()
    past = []
    if past_len:
        prefix = os.path.join(work, "past_")
        prefill_p = os.path.join(work, "prefill_ids.npy")
        np.save(prefill_p, ids[:, :past_len])
        subprocess.run([sys.executable, __file__, "peer", "--system",
                        "prefill", "--family", a.family, "--model", model,
                        "--ids", prefill_p, "--out", prefix, "--threads",
                        str(a.threads)], check=True, env=torch_env)
        for l in range(layers):
            past += [prefix + "%d_k.npy" % l, prefix + "%d_v.npy" % l]
    # The cache rounded to bf16 (to nearest even), as tfc's bf16 build
    # takes it: its bits ('<u2').
    past_bf16 = []
    for p in past if a.bf16 else []:
        past_bf16.append(p[:-len(".npy")] + "_bf16.npy")
        np.save(past_bf16[-1], f32_to_bf16(np.load(p)))
    # (".dynamo": exports of the TorchScript exporter, which this script
    # used before, are not reused)
    onnx = os.path.join(work, tag + ".dynamo.onnx")
    if not os.path.exists(onnx):
        export(a.family, model, onnx, b, s, past)
    bins = os.path.join(ROOT, "build", "bin")
    libs = {}
    NEW = "tfc fused --present=new"
    builds = [("tfc fused", "fused", []), ("tfc unfused", "unfused",
                                           ["--no-fusion"])]
    if past_len:
        builds.append((NEW, "fused_new", ["--present=new"]))
    BF16 = "tfc fused --dtype=bf16"
    BF16_NEW = BF16 + " --present=new"
    if a.bf16:
        builds.append((BF16, "fused_bf16", ["--dtype=bf16"]))
        if past_len:
            builds.append((BF16_NEW, "fused_bf16_new",
                           ["--dtype=bf16", "--present=new"]))
    quantized = ["tfc fused --quantize-weights=int%d%s" % (b, act)
                 for b in (8, 4)
                 for act in ("", " --quantize-activations=int8")]
    if a.quantize:
        for x in quantized:
            flags = x.split()[2:]
            builds.append((x, "fused_" + "_".join(f[-4:] for f in flags),
                           flags))
    for name, suffix, flags in builds:
        lib = os.path.join(work, "%s.%s.so" % (tag, suffix))
        cmd = [os.path.join(bins, "tfc-compile"), "--hf", model, "--batch",
               a.tfc_batches or str(b), "--seq-len", str(s), "-o",
               lib] + flags
        if past_len:
            cmd.append("--past-len=%d" % past_len)
        r = subprocess.run(cmd, check=True, capture_output=True, text=True)
        if name == "tfc fused":
            print(r.stderr.strip())
        libs[name] = lib
    systems = ["tfc fused", "tfc unfused", "PyTorch eager", "ONNX Runtime"]
    if past_len:
        systems.append(NEW)
    if a.bf16:
        systems += [BF16] + ([BF16_NEW] if past_len else []) + [
            "PyTorch eager bfloat16"]
    onnx_of = {"ONNX Runtime": onnx}
    if a.quantize:
        systems += quantized
        for bits in (8, 4):
            for level in (0, 4):
                x = "ONNX Runtime int%d weights, accuracy level %d" % (bits,
                                                                     level)
                onnx_of[x] = os.path.join(work, tag + ".dynamo.int%d_%d.onnx" % (
                    bits, level))
                if not os.path.exists(onnx_of[x]):
                    quantize_onnx(onnx, onnx_of[x], bits, level)
                systems.append(x)
    medians = {x: [] for x in systems}
    outs = {}
    for r in range(a.rounds):
        order = systems[r % len(systems):] + systems[:r % len(systems)]
        for x in order:
            out = os.path.join(work, "out_%d.npy" % systems.index(x))
            if x.startswith("tfc"):
                cmd = [os.path.join(bins, "tfc-run"), libs[x], "--weights",
                       os.path.join(model, "model.safetensors"), "--input",
                       ids_p, "--input", mask_p]
                for p in past_bf16 if "bf16" in x else past:
                    cmd += ["--input", p]
                cmd += ["--output", out]
                if past_len:  # the new cache, not compared
                    for i in range(2 * layers):
                        cmd += ["--output", os.path.join(
                            work, "present_%d.npy" % i)]
                cmd += ["--repeat", str(a.runs), "--warmup", "2",
                        "--threads", str(a.threads)]
            else:
                cmd = [sys.executable, __file__, "peer", "--system",
                       {"PyTorch eager": "torch",
                        "PyTorch eager bfloat16": "torch-bf16"}.get(x, "ort"),
                       "--family", a.family, "--model",
                       model, "--onnx", onnx_of.get(x, onnx), "--ids", ids_p,
                       "--out", out,
                       "--threads", str(a.threads), "--runs", str(a.runs),
                       "--past"] + past
            text = subprocess.run(cmd, check=True, capture_output=True,
                                  text=True, env=torch_env
                                  if x.startswith("PyTorch") else env)
            m = re.search(r"median ([0-9.]+) ms", text.stdout + text.stderr)
            medians[x].append(float(m.group(1)))
            outs[x] = out
    def load(path):  # bf16 outputs ('<u2' bits) widened
        x = np.load(path)
        return (bf16_to_f32(x) if x.dtype == np.uint16 else x).astype(
            np.float64)
    ref = load(outs["PyTorch eager"])
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short",
                             "HEAD"], capture_output=True, text=True).stdout
    title = {"gpt2": "GPT-2 124M shape",
             "llama": "LLaMA, hidden 768, GQA 12 on 4",
             "neox": "Pythia-160M shape (GPT-NeoX)"}[a.family]
    step = ("seq %d" % s if not past_len else
            "%d new token%s after a cache of %d" % (s, "" if s == 1 else "s",
                                                   past_len))
    print("\n### %s, %d blocks (random weights), batch %d, %s, %d "
          "thread%s -- %s, tfc %s\n" % (title, a.layers, b, step, a.threads,
                                         "" if a.threads == 1 else "s", when,
                                         commit.strip()))
    print("| system | median ms | round medians ms | tfc fused is | max abs "
          "diff vs PyTorch |\n|---|---:|---:|---|---:|")
    base = statistics.median(medians["tfc fused"])
    for x in systems:
        med = statistics.median(medians[x])
        diff = np.abs(load(outs[x]) - ref).max()
        if x == "tfc fused":
            versus = "-"
        elif x.startswith("tfc fused"):  # a variant: its own speed-up
            versus = "(this build runs %.2fx its speed)" % (base / med)
        else:
            versus = ("%.2fx faster" if med >= base else "%.2fx (slower)") % (
                med / base)
        print("| %s | %.1f | %.1f-%.1f | %s | %.1e |" % (
            x, med, min(medians[x]), max(medians[x]), versus, diff))


if __name__ == "__main__":
    sys.exit(main())
