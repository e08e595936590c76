"""LLaMA-family decoders imported from config.json + model.safetensors
(tfc-compile --hf), fused and unfused, in f32, f16 and bf16, against a
float64 numpy model written from transformers' modeling_llama.py (eager
attention: RMSNorm, rotary embeddings, grouped-query attention with the
combined causal + padding mask of finfo.min, SwiGLU), with Qwen2's Q/K/V
biases (modeling_qwen2.py), Qwen3's per-head RMSNorm of Q and K
(modeling_qwen3.py) and Phi-3's fused projections (modeling_phi3.py): random
weights, odd sizes, a padded batch row.

usage: llama.py BINDIR WORKDIR [SEED] [--target=cpu|nvptx]
                [--gpu-binary=cubin|ptx] [--cases=NAME,...]
       llama.py --write DIR [--set FIELD=JSON]... [--unset FIELD]...
                [--shape TENSOR=d0,d1]...   (only write the model directory)
"""

import math
import os
import sys

import numpy as np

import gpt2
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "pylib"))
from tfc_testing.arrays import (random_tokens, random_weights,  # noqa: E402
                                rounded_weights)
from tfc_testing.harness import start  # noqa: E402
from tfc_testing.reference import (decoder_masks, rms_norm,  # noqa: E402
                                   silu, softmax)

CFG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
       "hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4,
       "num_key_value_heads": 2, "intermediate_size": 100,
       "vocab_size": 101, "max_position_embeddings": 64,
       "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "hidden_act": "silu",
       "rope_scaling": None, "attention_bias": False, "mlp_bias": False,
       "tie_word_embeddings": False}
BATCH, SEQ = 2, 13

# LlamaModel's layout (no prefix), head_dim apart from hidden / heads,
# multi-query attention (one K/V head), biases, Llama 3.1's rope scaling with
# an original context of 64 so that all three frequency bands occur.
LLAMA3 = dict(CFG, architectures=["LlamaModel"], hidden_size=40,
              num_attention_heads=5, num_key_value_heads=1, head_dim=16,
              intermediate_size=72, rope_theta=500000.0,
              attention_bias=True, mlp_bias=True,
              rope_scaling={"rope_type": "llama3", "factor": 8.0,
                            "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                            "original_max_position_embeddings": 64})
# Mistral: the LLaMA graph while the sliding window covers the sequence.
MISTRAL = dict(CFG, architectures=["MistralForCausalLM"],
               model_type="mistral", num_hidden_layers=1,
               num_key_value_heads=1, sliding_window=4096,
               rope_scaling=None)
# ... with a window of 5 over the 13 tokens: the sliding layers' mask hides
# the keys 5 or more positions back (transformers' sliding_window).
MISTRAL_WINDOW = dict(MISTRAL, num_hidden_layers=2, sliding_window=5)
# Qwen2: biases on Q, K and V (not o_proj), the head tied to the token
# embeddings, a sliding window that use_sliding_window leaves unused.
QWEN2 = dict({k: v for k, v in CFG.items()
              if k not in ("attention_bias", "mlp_bias")},
             architectures=["Qwen2ForCausalLM"], model_type="qwen2",
             rope_theta=1000000.0, tie_word_embeddings=True,
             use_sliding_window=False, sliding_window=4, max_window_layers=1)
# ... using it (use_sliding_window) on layers max_window_layers (1) and up.
# (A window of 5 over the 4 padding tokens of the second row leaves every
# row a visible key: a row that sees none averages over hidden keys whose
# finfo.min scores f16 sums make equal and the f32 kernels do not.)
QWEN2_WINDOW = dict(QWEN2, use_sliding_window=True, sliding_window=5)
# Qwen3: Q and K normalised per head (q_norm, k_norm over head_dim), a
# head_dim apart from hidden / heads.
QWEN3 = dict({k: v for k, v in CFG.items() if k != "mlp_bias"},
             architectures=["Qwen3ForCausalLM"], model_type="qwen3",
             head_dim=16, rope_theta=1000000.0, use_sliding_window=False,
             sliding_window=None)
# Phi-3: Q, K and V in one projection (qkv_proj), gate and up in another
# (gate_up_proj), a sliding window that covers the sequence.
PHI3 = dict({k: v for k, v in CFG.items()
             if k not in ("attention_bias", "mlp_bias")},
            architectures=["Phi3ForCausalLM"], model_type="phi3",
            sliding_window=47, original_max_position_embeddings=64)
# Granite: LLaMA's blocks with the embeddings, the scores (instead of
# 1/sqrt(head_dim)), each block's output and the logits (divided) scaled by
# factors of Granite 3's kind; its head tied to the embeddings.
GRANITE = dict(CFG, architectures=["GraniteForCausalLM"],
               model_type="granite", embedding_multiplier=12.0,
               attention_multiplier=0.125, residual_multiplier=0.22,
               logits_scaling=8.0, tie_word_embeddings=True)
# OLMo 2: norms of the attention's and the MLP's outputs (none of their
# inputs), Q and K normalised over all their heads' features.
OLMO2 = dict(CFG, architectures=["Olmo2ForCausalLM"], model_type="olmo2",
             rms_norm_eps=1e-5)
# Phi-4-mini's layout: the rotary embedding turns 12 of each head's 16
# features, longrope scaling from an original context of 8 (the test's 13
# tokens take long_factor, 6 would take short_factor; cos and sin scaled by
# sqrt(1 + ln 8 / ln 8)), the head tied to the embeddings.
PHI4 = dict(PHI3, head_dim=16, partial_rotary_factor=0.75,
            original_max_position_embeddings=8, tie_word_embeddings=True,
            rope_scaling={"type": "longrope",
                          "short_factor": [1.0, 1.1, 1.3, 1.7, 2.3, 3.0],
                          "long_factor": [1.0, 1.5, 2.5, 4.0, 6.0, 9.0]})


def head_dim(cfg):
    if cfg.get("head_dim"):
        return cfg["head_dim"]
    if cfg.get("model_type") == "qwen3":  # Qwen3Config's default
        return 128
    return cfg["hidden_size"] // cfg["num_attention_heads"]


def weights(rng, cfg, prefix):
    family = cfg.get("model_type", "llama")
    h, inner, d = cfg["hidden_size"], cfg["intermediate_size"], head_dim(cfg)
    hq, hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    w = {prefix + "embed_tokens.weight": (cfg["vocab_size"], h),
         prefix + "norm.weight": (h,)}
    if prefix and not cfg.get("tie_word_embeddings"):  # LlamaForCausalLM
        w["lm_head.weight"] = (cfg["vocab_size"], h)
    for l in range(cfg["num_hidden_layers"]):
        p = prefix + "layers.%d." % l
        attn = {"q_proj": (hq * d, h), "k_proj": (hkv * d, h),
                "v_proj": (hkv * d, h), "o_proj": (h, hq * d)}
        mlp = {"gate_proj": (inner, h), "up_proj": (inner, h),
               "down_proj": (h, inner)}
        if family == "phi3":
            attn = {"qkv_proj": ((hq + 2 * hkv) * d, h),
                    "o_proj": (h, hq * d)}
            mlp = {"gate_up_proj": (2 * inner, h), "down_proj": (h, inner)}
        for name, shape in attn.items():
            w[p + "self_attn." + name + ".weight"] = shape
            if (name != "o_proj" if family == "qwen2"
                    else cfg.get("attention_bias")):
                w[p + "self_attn." + name + ".bias"] = (shape[0],)
        if family == "qwen3":
            w[p + "self_attn.q_norm.weight"] = (d,)
            w[p + "self_attn.k_norm.weight"] = (d,)
        if family == "olmo2":
            w[p + "self_attn.q_norm.weight"] = (hq * d,)
            w[p + "self_attn.k_norm.weight"] = (hkv * d,)
        for name, shape in mlp.items():
            w[p + "mlp." + name + ".weight"] = shape
            if family in ("llama", "mistral") and cfg.get("mlp_bias"):
                w[p + "mlp." + name + ".bias"] = (shape[0],)
        w[p + "post_attention_layernorm.weight"] = (h,)
        if family == "olmo2":
            w[p + "post_feedforward_layernorm.weight"] = (h,)
        else:
            w[p + "input_layernorm.weight"] = (h,)
    return random_weights(rng, w, ("embed_tokens", "lm_head"))


def rotary_dim(cfg):
    """The features of each head the rotary embedding turns (Phi-3's
    partial_rotary_factor)."""
    return int(head_dim(cfg) * cfg.get("partial_rotary_factor", 1.0))


def inv_freq(cfg, tokens=None):
    """transformers' rotary inverse frequencies with rope_scaling, in
    float64, and the factor of cos and sin; `tokens` positions in use
    (longrope: long_factor past original_max_position_embeddings). Without
    `tokens`, only the frequencies."""
    d = rotary_dim(cfg)
    f = 1.0 / cfg["rope_theta"] ** (np.arange(0, d, 2) / d)
    rs = cfg.get("rope_scaling")
    kind = rs.get("rope_type", rs.get("type")) if rs else "default"
    scaling = 1.0
    if kind == "longrope":  # _compute_longrope_parameters
        original = cfg["original_max_position_embeddings"]
        factor = cfg["max_position_embeddings"] / original
        scaling = math.sqrt(1 + math.log(factor) / math.log(original)) \
            if factor > 1 else 1.0
        ext = rs["long_factor"] if tokens > original else rs["short_factor"]
        f = f / np.array(ext)
    elif kind == "linear":
        f = f / rs["factor"]
    elif kind == "llama3":
        f = llama3_frequencies(f, rs)
    return f if tokens is None else (f, scaling)


def llama3_frequencies(f, rs):
    """Llama 3.1's per-band rescaling of the frequencies f."""
    factor, low, high = rs["factor"], rs["low_freq_factor"], \
        rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    wavelen = 2 * math.pi / f
    scaled = np.where(wavelen > old / low, f / factor, f)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < old / high) & ~(wavelen > old / low)
    return np.where(medium, smoothed, scaled)


def rotary(cfg, s):
    """apply_rotary_pos_emb at positions 0..s-1 as a function of t [b,
    heads, s, d]: its first rotary_dim(cfg) features turn, the others
    pass."""
    inv, scaling = inv_freq(cfg, s)
    freqs = np.outer(np.arange(s), inv)
    emb = np.concatenate([freqs, freqs], -1)
    cos, sin = np.cos(emb) * scaling, np.sin(emb) * scaling
    rd = rotary_dim(cfg)

    def rope(t):
        r = t[..., :rd]
        rotated = np.concatenate([-r[..., rd // 2:], r[..., :rd // 2]], -1)
        return np.concatenate([r * cos + rotated * sin, t[..., rd:]], -1)
    return rope


def reference(cfg, w, ids, mask, kv=None, act=None, probs=None):
    """transformers' LlamaModel.forward, eager attention, in float64; each
    layer's keys (after the rotary embedding) and values [B, kv heads, S, D]
    are appended to `kv` when given (its past_key_values), its attention
    probabilities [B, heads, S, S] to `probs`; `act`, when given, maps the
    input of each projection first."""
    w = {k[len("model."):] if k.startswith("model.") else k:
         v.astype(np.float64) for k, v in w.items()}
    hq, hkv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], \
        head_dim(cfg)
    for name in list(w):  # Phi-3's fused projections, split in order
        if name.endswith("qkv_proj.weight"):
            parts = np.split(w.pop(name), [hq * d, (hq + hkv) * d])
            for p, x in zip(("q", "k", "v"), parts):
                w[name.replace("qkv_proj", p + "_proj")] = x
        elif name.endswith("gate_up_proj.weight"):
            gate, up = np.split(w.pop(name), 2)
            w[name.replace("gate_up_proj", "gate_proj")] = gate
            w[name.replace("gate_up_proj", "up_proj")] = up
    eps = cfg["rms_norm_eps"]
    b, s = ids.shape
    x = w["embed_tokens.weight"][ids] * cfg.get("embedding_multiplier", 1.0)
    # Granite's factors (1 elsewhere).
    scale = cfg.get("attention_multiplier", 1 / math.sqrt(d))
    residual = cfg.get("residual_multiplier", 1.0)
    rope = rotary(cfg, s)

    # _update_causal_mask: finfo.min where the key is in the future or
    # padding, added to the scores; the sliding layers' window also hides
    # key j from query i when i - j >= W.
    window = cfg.get("sliding_window")
    if cfg.get("model_type", "").startswith("qwen") and \
            not cfg.get("use_sliding_window"):
        window = None
    causal_mask, window_mask = decoder_masks(mask, s, window)

    def sliding(l):
        if window is None:
            return False
        return not cfg.get("model_type", "").startswith("qwen") or \
            l >= cfg.get("max_window_layers", 28)

    def lin(a, name):
        y = (act(a) if act else a) @ w[name + ".weight"].T
        return y + w[name + ".bias"] if name + ".bias" in w else y

    # OLMo 2: post-norms only, Q and K normalised across their heads.
    olmo2 = cfg.get("model_type") == "olmo2"

    def post_norm(y, name):
        return rms_norm(y, w[name], eps) if olmo2 else y

    for l in range(cfg["num_hidden_layers"]):
        p = "layers.%d." % l
        a = x if olmo2 else rms_norm(x, w[p + "input_layernorm.weight"], eps)

        def heads(t, n, norm=None):
            qk_norm = p + "self_attn." + str(norm) + ".weight"
            if olmo2 and qk_norm in w:  # over all the heads' features
                t = rms_norm(t, w[qk_norm], eps)
            t = t.reshape(b, s, n, d)
            if not olmo2 and qk_norm in w:  # Qwen3: per head
                t = rms_norm(t, w[qk_norm], eps)
            return t.transpose(0, 2, 1, 3)
        q = rope(heads(lin(a, p + "self_attn.q_proj"), hq, "q_norm"))
        k = rope(heads(lin(a, p + "self_attn.k_proj"), hkv, "k_norm"))
        v = heads(lin(a, p + "self_attn.v_proj"), hkv)
        if kv is not None:
            kv.append((k, v))
        k, v = (np.repeat(t, hq // hkv, axis=1) for t in (k, v))
        pr = softmax(q @ k.transpose(0, 1, 3, 2) * scale +
                     (window_mask if sliding(l) else causal_mask))
        if probs is not None:
            probs.append(pr)
        ctx = pr @ v
        ctx = ctx.transpose(0, 2, 1, 3).reshape(b, s, hq * d)
        x = x + post_norm(lin(ctx, p + "self_attn.o_proj"),
                          p + "post_attention_layernorm.weight") * residual
        a = x if olmo2 else \
            rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        m = silu(lin(a, p + "mlp.gate_proj")) * lin(a, p + "mlp.up_proj")
        x = x + post_norm(lin(m, p + "mlp.down_proj"),
                          p + "post_feedforward_layernorm.weight") * residual
    return rms_norm(x, w["norm.weight"], eps)


def prefix_of(cfg):
    return "model." if cfg["architectures"][0].endswith("ForCausalLM") \
        else ""


def write_model(directory, rng, cfg, shapes=None):
    """config.json and model.safetensors of a random LLaMA in `directory`;
    `shapes` replaces the shapes of some tensors. Returns the weights."""
    full = dict(CFG)
    full.update({k: v for k, v in cfg.items()
                 if k in CFG or k == "head_dim"})
    return gpt2.write_directory(directory, rng, cfg,
                                weights(rng, full, prefix_of(cfg)), shapes)


# The runtime tests' model (tests/Runtime/Inputs): 17 MB of f32 weights.
SMALL = dict(CFG, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=2, intermediate_size=1024, vocab_size=512)


def write_small_model(directory, rng):
    """A random LLaMA of SMALL's shape in `directory`; returns its config,
    its weights and the path of its model.safetensors."""
    w = write_model(directory, rng, SMALL)
    return dict(SMALL), w, os.path.join(directory, "model.safetensors")


def logits_model(h, rng, name, cfg, head):
    """A random model of `cfg` written under `name` with a batch of tokens,
    and the float64 logits through its head weight `head`."""
    model = h.path(name)
    w = write_model(model, rng, cfg)
    ids, mask = random_tokens(rng, cfg["vocab_size"], BATCH, SEQ)
    ref = reference(cfg, w, ids, mask) @ w[head].astype(np.float64).T
    return model, w, ids, mask, ref / cfg.get("logits_scaling", 1.0)


def main():
    if sys.argv[1] == "--write":
        return gpt2.write_only(sys.argv[2:], CFG, write_model, prefix_of)
    h, rng, target = start(sys.argv[1:])
    cases = [("llama", CFG), ("llama3", LLAMA3), ("mistral", MISTRAL),
             ("qwen2", QWEN2), ("qwen2_window", QWEN2_WINDOW),
             ("qwen3", QWEN3), ("phi3", PHI3), ("phi4", PHI4),
             ("granite", GRANITE), ("olmo2", OLMO2)]
    if h.wants("logits"):
        # LlamaForCausalLM's head (untied lm_head.weight): the logits.
        model, w, ids, mask, ref = logits_model(h, rng, "llama_logits", CFG,
                                                "lm_head.weight")
        for dtype, tol in (("f32", 1e-4), ("f16", 10 * 2.0**-11)):
            lib, _ = h.build_hf("llama_logits_" + dtype, model, BATCH, SEQ,
                                True, ["--dtype=" + dtype,
                                       "--output=logits"])
            out = h.run_hf(lib, model, [ids, mask])
            h.expect("llama %s logits are f32 [B, S, vocab]" % dtype,
                     out.dtype == np.float32 and
                     out.shape == (BATCH, SEQ, CFG["vocab_size"]))
            h.expect_close("llama %s logits" % dtype, out, ref, tol)
        h.expect_token_refused("llama", lib, model, ids, mask,
                               CFG["vocab_size"])
        if target == "cpu":
            # --quantize-weights: every projection and the head.
            axes = {n: 1 for n in w if n.endswith("_proj.weight") or
                    n == "lm_head.weight"}
            def logits(wts, bits, act):
                x = reference(CFG, wts, ids, mask, act=act)
                return (act(x) if act else x) @ \
                    wts["lm_head.weight"].astype(np.float64).T
            h.check_quantized("llama logits", logits, model, w, [ids, mask],
                              axes, 1e-4, ["--output=logits"])
    if h.wants("kv"):
        # The KV cache: the GQA layout, f32 and f16.
        model = h.path("llama_kv")
        w = write_model(model, rng, CFG)
        ids, mask = random_tokens(rng, CFG["vocab_size"], BATCH, SEQ, 3)
        for dtype, tol in (("f32", 1e-4), ("f16", 10 * 2.0**-11)):
            h.check_kv_cache("llama", reference, CFG, CFG["num_hidden_layers"],
                             model, w, ids, mask, dtype, tol)
        h.check_fixed_cache("llama", reference, CFG, CFG["num_hidden_layers"],
                            model, w, ids, mask, "f32", 1e-4)
    # Heads tied to the token embeddings: Qwen2's logits; Granite's, divided
    # by logits_scaling.
    for case, name, cfg, what in (
            ("qwen", "qwen2", QWEN2, "tied head"),
            ("granite_logits", "granite", GRANITE,
             "tied head, divided by logits_scaling")):
        if not h.wants(case):
            continue
        model, w, ids, mask, ref = logits_model(
            h, rng, name + "_logits", cfg, "model.embed_tokens.weight")
        lib, _ = h.build_hf(name + "_logits", model, BATCH, SEQ, True,
                            ["--output=logits"])
        h.expect_close("%s f32 logits (%s)" % (name, what),
                       h.run_hf(lib, model, [ids, mask]), ref, 1e-4)
    if h.wants("qwen"):
        # Qwen3's normalised keys through the KV cache.
        model, w, ids, mask = h.random_model(rng, write_model, "qwen3_kv",
                                             QWEN3, BATCH, SEQ, 3)
        h.check_kv_cache("qwen3", reference, QWEN3,
                         QWEN3["num_hidden_layers"], model, w, ids, mask,
                         "f32", 1e-4)
    if h.wants("mistral_window"):
        # Mistral's window shorter than the sequence, through the KV cache
        # too (a chunk and a decode step whose window starts in the past).
        model = h.path("mistral_window")
        w = write_model(model, rng, MISTRAL_WINDOW)
        ids, mask = random_tokens(rng, MISTRAL_WINDOW["vocab_size"], BATCH,
                                  SEQ, 4)
        h.check_hidden_states(
            "mistral_window", model, ids, mask,
            lambda dtype: reference(MISTRAL_WINDOW, rounded_weights(w, dtype),
                                    ids, mask))
        h.check_kv_cache("mistral_window", reference, MISTRAL_WINDOW,
                         MISTRAL_WINDOW["num_hidden_layers"], model, w, ids,
                         mask, "f32", 1e-4)
        # ... and one build for the decode steps over a fixed-size cache
        # (--position-ids: the window over the tokens' positions).
        h.check_fixed_cache("mistral_window", reference, MISTRAL_WINDOW,
                            MISTRAL_WINDOW["num_hidden_layers"], model, w,
                            ids, mask, "f32", 1e-4)
    if h.wants("phi4"):
        # Phi-4-mini's layout within its original context: short_factor.
        model = h.path("phi4_short")
        w = write_model(model, rng, PHI4)
        ids, mask = random_tokens(rng, PHI4["vocab_size"], BATCH, 6, 2)
        ref = reference(PHI4, w, ids, mask)
        for fused in (True, False):
            lib, _ = h.build_hf("phi4_short", model, BATCH, 6, fused)
            h.expect_close("phi4 f32 6 tokens (short_factor) %s" %
                           ("fused" if fused else "unfused"),
                           h.run_hf(lib, model, [ids, mask]), ref, 1e-4)
        # ... and through the KV cache (13 tokens: long_factor).
        model = h.path("phi4_kv")
        w = write_model(model, rng, PHI4)
        ids, mask = random_tokens(rng, PHI4["vocab_size"], BATCH, SEQ, 3)
        h.check_kv_cache("phi4", reference, PHI4, PHI4["num_hidden_layers"],
                         model, w, ids, mask, "f32", 1e-4)
    h.check_cases(rng, cases, write_model, reference, BATCH, SEQ)
    h.finish()


if __name__ == "__main__":
    main()
