"""Gemma-family decoders (Gemma, Gemma 2, Gemma 3's text model) imported from
config.json + model.safetensors (tfc-compile --hf), fused and unfused, in
f32, f16 and bf16, against a float64 numpy model written from transformers'
modeling_gemma.py, modeling_gemma2.py and modeling_gemma3.py (eager
attention): embeddings times sqrt(hidden), GemmaRMSNorm's (1 + gamma),
the tanh GELU, Gemma 2's post-norms and soft caps, Gemma 3's per-head norms
of Q and K and its sliding layers' own rotary base; random weights, odd
sizes, a padded batch row.

usage: gemma.py BINDIR WORKDIR [SEED] [--target=cpu|nvptx]
                [--gpu-binary=cubin|ptx] [--cases=NAME,...]
       gemma.py --write DIR [--set FIELD=JSON]... [--unset FIELD]...
                [--shape TENSOR=d0,d1]...   (only write the model directory)
"""

import math
import os
import sys

import numpy as np

import gpt2
import llama
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "pylib"))
from tfc_testing.arrays import random_tokens, random_weights  # noqa: E402
from tfc_testing.harness import start  # noqa: E402
from tfc_testing.reference import (decoder_masks, gelu_tanh,  # noqa: E402
                                   rms_norm, softmax)

GEMMA = {"architectures": ["GemmaForCausalLM"], "model_type": "gemma",
         "hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 100,
         "vocab_size": 101, "max_position_embeddings": 64,
         "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "hidden_act": "gelu",
         "hidden_activation": "gelu_pytorch_tanh", "attention_bias": False,
         "tie_word_embeddings": True}
# Gemma 2: soft caps small enough to bend these scores and logits, a window
# over the sequence on the even layers.
GEMMA2 = dict(GEMMA, architectures=["Gemma2ForCausalLM"], model_type="gemma2",
              query_pre_attn_scalar=24, attn_logit_softcapping=3.0,
              final_logit_softcapping=5.0, sliding_window=32)
# Gemma 3: layers 0 and 2 sliding (their rotary base rope_local_base_freq),
# layer 1 global (rope_theta with linear scaling); per-head norms of Q and K.
GEMMA3 = dict(GEMMA, architectures=["Gemma3ForCausalLM"],
              model_type="gemma3_text", num_hidden_layers=3,
              sliding_window=20, sliding_window_pattern=2,
              rope_theta=1000000.0, rope_local_base_freq=10000.0,
              rope_scaling={"rope_type": "linear", "factor": 2.0},
              query_pre_attn_scalar=16, attn_logit_softcapping=None,
              final_logit_softcapping=None)
# ... with windows of 5 and 6 over the 13 tokens: their sliding layers'
# masks hide the keys that many positions back.
GEMMA2_WINDOW = dict(GEMMA2, sliding_window=5)
GEMMA3_WINDOW = dict(GEMMA3, sliding_window=6)
BATCH, SEQ = 2, 13


def generation(cfg):
    return {"gemma": 1, "gemma2": 2, "gemma3_text": 3}[cfg["model_type"]]


def sliding(cfg):
    """Per layer: whether it uses the sliding window (and for Gemma 3 the
    local rotary base)."""
    n = cfg["num_hidden_layers"]
    if "layer_types" in cfg:
        return [t == "sliding_attention" for t in cfg["layer_types"]]
    pattern = {1: 0, 2: 2, 3: cfg.get("sliding_window_pattern", 6)}[
        generation(cfg)]
    return [bool(pattern) and (l + 1) % pattern != 0 for l in range(n)]


def weights(rng, cfg, prefix):
    h, inner, d = cfg["hidden_size"], cfg["intermediate_size"], \
        cfg["head_dim"]
    hq, hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    gen = generation(cfg)
    w = {prefix + "embed_tokens.weight": (cfg["vocab_size"], h),
         prefix + "norm.weight": (h,)}
    if not cfg.get("tie_word_embeddings", True):
        w["lm_head.weight"] = (cfg["vocab_size"], h)
    norms = ["input_layernorm", "post_attention_layernorm"]
    if gen >= 2:
        norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
    for l in range(cfg["num_hidden_layers"]):
        p = prefix + "layers.%d." % l
        for name, shape in {"q_proj": (hq * d, h), "k_proj": (hkv * d, h),
                            "v_proj": (hkv * d, h),
                            "o_proj": (h, hq * d)}.items():
            w[p + "self_attn." + name + ".weight"] = shape
        if gen == 3:
            w[p + "self_attn.q_norm.weight"] = (d,)
            w[p + "self_attn.k_norm.weight"] = (d,)
        for name, shape in {"gate_proj": (inner, h), "up_proj": (inner, h),
                            "down_proj": (h, inner)}.items():
            w[p + "mlp." + name + ".weight"] = shape
        for n in norms:
            w[p + n + ".weight"] = (h,)
    # Gemma's norms scale by 1 + gamma: gains near 0.
    return random_weights(rng, w, ("embed_tokens", "lm_head"), gain=0.0)


def norm(x, g, eps):
    """GemmaRMSNorm: the gain is 1 + gamma."""
    return rms_norm(x, 1 + g, eps)


def reference(cfg, w, ids, mask, kv=None):
    """transformers' Gemma / Gemma 2 / Gemma 3 text model, eager attention,
    in float64: the last hidden state; each layer's keys (after the rotary
    embedding) and values are appended to `kv` when given."""
    w = {k[len("model."):] if k.startswith("model.") else k:
         v.astype(np.float64) for k, v in w.items()}
    gen = generation(cfg)
    hq, hkv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], \
        cfg["head_dim"]
    eps = cfg["rms_norm_eps"]
    b, s = ids.shape
    x = w["embed_tokens.weight"][ids] * math.sqrt(cfg["hidden_size"])

    def tables(inv):
        freqs = np.outer(np.arange(s), inv)
        emb = np.concatenate([freqs, freqs], -1)
        return np.cos(emb), np.sin(emb)
    rope = tables(llama.inv_freq(cfg))
    local = tables(1.0 / cfg.get("rope_local_base_freq", 10000.0) **
                   (np.arange(0, d, 2) / d))

    def rotate(t, cs):  # [b, heads, s, d]
        cos, sin = cs
        rotated = np.concatenate([-t[..., d // 2:], t[..., :d // 2]], -1)
        return t * cos + rotated * sin

    # The sliding layers: key j also hidden from query i when i - j >= W.
    causal_mask, window_mask = decoder_masks(
        mask, s, cfg.get("sliding_window", 4096))
    scale = cfg["query_pre_attn_scalar"] ** -0.5 if gen >= 2 else \
        d ** -0.5
    cap = cfg.get("attn_logit_softcapping", 50.0 if gen == 2 else None) \
        if gen >= 2 else None

    def lin(a, name):
        return a @ w[name + ".weight"].T

    for l, slide in enumerate(sliding(cfg)):
        p = "layers.%d." % l
        a = norm(x, w[p + "input_layernorm.weight"], eps)

        def heads(t, n, name=None):
            t = t.reshape(b, s, n, d)
            if gen == 3 and name:  # q_norm, k_norm
                t = norm(t, w[p + "self_attn." + name + ".weight"], eps)
            return t.transpose(0, 2, 1, 3)
        cs = local if gen == 3 and slide else rope
        q = rotate(heads(lin(a, p + "self_attn.q_proj"), hq, "q_norm"), cs)
        k = rotate(heads(lin(a, p + "self_attn.k_proj"), hkv, "k_norm"), cs)
        v = heads(lin(a, p + "self_attn.v_proj"), hkv)
        if kv is not None:
            kv.append((k, v))
        k, v = (np.repeat(t, hq // hkv, axis=1) for t in (k, v))
        sc = q @ k.transpose(0, 1, 3, 2) * scale
        if cap:
            sc = np.tanh(sc / cap) * cap
        ctx = softmax(sc + (window_mask if slide else causal_mask)) @ v
        o = lin(ctx.transpose(0, 2, 1, 3).reshape(b, s, hq * d),
                p + "self_attn.o_proj")
        if gen >= 2:
            o = norm(o, w[p + "post_attention_layernorm.weight"], eps)
        x = x + o
        a = norm(x, w[p + ("pre_feedforward_layernorm" if gen >= 2 else
                           "post_attention_layernorm") + ".weight"], eps)
        m = lin(gelu_tanh(lin(a, p + "mlp.gate_proj")) *
                lin(a, p + "mlp.up_proj"), p + "mlp.down_proj")
        if gen >= 2:
            m = norm(m, w[p + "post_feedforward_layernorm.weight"], eps)
        x = x + m
    return norm(x, w["norm.weight"], eps)


def logits(cfg, w, ids, mask):
    """The tied head's logits, capped by final_logit_softcapping."""
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    y = reference(cfg, w, ids, mask) @ head.astype(np.float64).T
    cap = cfg.get("final_logit_softcapping",
                  30.0 if generation(cfg) == 2 else None)
    return np.tanh(y / cap) * cap if cap else y


def write_model(directory, rng, cfg, shapes=None):
    """config.json and model.safetensors of a random Gemma in `directory`;
    `shapes` replaces the shapes of some tensors. Returns the weights."""
    return gpt2.write_directory(directory, rng, cfg,
                                weights(rng, cfg, "model."), shapes)


def main():
    if sys.argv[1] == "--write":
        return gpt2.write_only(sys.argv[2:], GEMMA, write_model,
                               lambda cfg: "model.")
    h, rng, target = start(sys.argv[1:])
    if h.wants("logits"):
        # Gemma 2's capped logits through the head tied to the embeddings.
        model = h.path("gemma2_logits")
        w = write_model(model, rng, GEMMA2)
        ids, mask = random_tokens(rng, GEMMA2["vocab_size"], BATCH, SEQ)
        lib, _ = h.build_hf("gemma2_logits", model, BATCH, SEQ, True,
                            ["--output=logits"])
        h.expect_close("gemma2 f32 logits (capped, tied head)",
                       h.run_hf(lib, model, [ids, mask]),
                       logits(GEMMA2, w, ids, mask), 1e-4)
    # Gemma 3 through the KV cache: both rotary bases, normalised keys; and
    # with a window shorter than the sequence.
    for case, name, cfg in (("kv", "gemma3", GEMMA3),
                            ("gemma3_window", "gemma3_window", GEMMA3_WINDOW)):
        if not h.wants(case):
            continue
        model, w, ids, mask = h.random_model(rng, write_model, name + "_kv",
                                             cfg, BATCH, SEQ, 3)
        h.check_kv_cache(name, reference, cfg, cfg["num_hidden_layers"],
                         model, w, ids, mask, "f32", 1e-4)
    h.check_cases(rng, (("gemma", GEMMA), ("gemma2", GEMMA2),
                        ("gemma2_window", GEMMA2_WINDOW), ("gemma3", GEMMA3)),
                  write_model, reference, BATCH, SEQ)
    h.finish()


if __name__ == "__main__":
    main()
