"""Decoders end to end in the device check: one decode step of a random
GPT-2 (f32, the 128th token after a KV cache of 127) and a random LLaMA
(f16, 128 tokens: grouped-query attention, rotary embeddings, RMSNorm,
SwiGLU).

Their weights do not travel: prepare compiles the fused build of each model
of tests/Integration/CPU/gpt2.py and llama.py at device size (batch 4, 128
tokens, the last two rows right padded) and carries the library and the
config; the run writes the same weights again from the seed, runs the
library and compares its last hidden state (and for the decode step, the
cache it returns) with the float64 numpy model of that test (GPT-2's checked
against transformers' GPT2Model, LLaMA's against LlamaModel): within 1e-4
in f32, 10 units of f16's roundoff in f16, as the CPU tests require. The
decode step's cache of 127 tokens is that reference's, rounded to f32.
"""

import json
import os
import sys

import numpy as np

# Appended, not prepended: that directory also holds a minilm.py.
sys.path.append(os.path.join(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))), "tests", "Integration",
    "CPU"))
import gpt2  # noqa: E402
import llama  # noqa: E402
import minilm  # noqa: E402  (this directory's, first on the path)

BATCH, SEQ, SEED = 4, 128, 2026


class Decoder:
    def __init__(self, name, module, cfg, flags, tol, about, past=0):
        self.name, self.module, self.cfg = name, module, cfg
        self.flags, self.tol, self.about = flags, tol, about
        self.past = past  # tokens in the KV cache the step takes
        if past:
            self.flags = flags + ["--past-len=%d" % past]
        self.lib = os.path.join("models", name + ".fused.so")
        self.layers = cfg.get("n_layer", cfg.get("num_hidden_layers"))

    def write(self, directory):
        return self.module.write_model(directory, np.random.default_rng(SEED),
                                       self.cfg)


DECODERS = [
    Decoder("gpt2", gpt2, dict(gpt2.CFG, n_embd=256, n_head=4,
                               n_positions=160, vocab_size=512),
            [], 1e-4, "2 blocks, padded rows, one token after a cache of %d"
            % (SEQ - 1), past=SEQ - 1),
    # LLaMA's proportions: head dim 64, 4 query heads per K/V head.
    Decoder("llama", llama, dict(llama.CFG, hidden_size=512,
                                 num_attention_heads=8, num_key_value_heads=2,
                                 intermediate_size=1376, vocab_size=512,
                                 max_position_embeddings=160),
            ["--dtype=f16"], 10 * 2.0**-11,
            "2 blocks, f16, GQA 8 on 2, padded rows"),
]


def inputs(cfg):
    rng = np.random.default_rng(SEED + 1)
    vocab = cfg.get("vocab_size")
    ids = rng.integers(0, vocab, (BATCH, SEQ)).astype(np.int64)
    mask = np.ones((BATCH, SEQ), dtype=np.int64)
    mask[2, SEQ - 30:] = 0
    mask[3, SEQ - 97:] = 0
    return ids, mask


def prepare(tfc_compile, out, target, gpu_flags, work):
    """Compiles each decoder's fused build into `out` and writes
    NAME/config.json; returns {name: error line or "ok"}."""
    status = {}
    for d in DECODERS:
        src = os.path.join(work, d.name + "-model")
        d.write(src)
        err = minilm.compile_hf(tfc_compile, src, BATCH, SEQ - d.past,
                                os.path.join(out, d.lib), target,
                                gpu_flags + d.flags)
        if not err:
            os.makedirs(os.path.join(out, d.name), exist_ok=True)
            with open(os.path.join(out, d.name, "config.json"), "w") as f:
                json.dump(d.cfg, f)
        status[d.name] = err or "ok"
    return status


def check(base, run, work, checks, clock):
    for d in DECODERS:
        if not os.path.exists(os.path.join(base, d.lib)):
            print("info %s: not prepared" % d.name, flush=True)
            continue
        label = "%s batch %d, %d tokens (%s) fused" % (d.name, BATCH, SEQ,
                                                       d.about)
        src = os.path.join(work, d.name + "-model")
        weights = d.write(src)
        ids, mask = inputs(d.cfg)
        kv = []
        ref = d.module.reference(d.cfg, weights, ids, mask, kv)[:, d.past:]
        arrays = [ids[:, d.past:], mask]
        for k, v in kv if d.past else ():
            arrays += [k[:, :, :d.past].astype(np.float32),
                       v[:, :, :d.past].astype(np.float32)]
        paths = []
        for i, a in enumerate(arrays):
            paths.append(os.path.join(work, "%s_in%d.npy" % (d.name, i)))
            np.save(paths[-1], a)
        outs = [os.path.join(work, "%s_out%d.npy" % (d.name, i))
                for i in range(1 + (2 * d.layers if d.past else 0))]
        _, err = run(os.path.join(base, d.lib), paths, outs,
                     timeout=min(120, clock.left() - 5),
                     weights=os.path.join(src, "model.safetensors"))
        if err:
            checks.add(False, label, err)
            continue
        pairs = [("last hidden state", np.load(outs[0]), ref)]
        if d.past:
            pairs.append(("the cache of %d tokens" % SEQ, np.concatenate(
                [np.load(p).astype(np.float64).ravel() for p in outs[1:]]),
                np.concatenate([t.ravel() for kv_l in kv for t in kv_l])))
        for what, got, want in pairs:
            got = got.astype(np.float64)
            rel = float(np.linalg.norm(got - want) / np.linalg.norm(want))
            ok = bool(np.all(np.isfinite(got))) and rel < d.tol
            checks.add(ok, label + ": " + what, "relative error %.1e "
                       "(< %.1e) against a float64 %s on the same weights"
                       % (rel, d.tol, d.name))
