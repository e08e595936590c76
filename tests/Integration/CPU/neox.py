"""GPT-NeoX, Phi and StableLM decoders imported from config.json +
model.safetensors (tfc-compile --hf), fused and unfused, in f32, f16 and
bf16, against a float64 numpy model written from transformers'
modeling_gpt_neox.py, modeling_phi.py and modeling_stablelm.py (eager
attention): LayerNorm with its bias, a rotary embedding over part of each
head, parallel residuals (attention and MLP reading the block's input),
GPT-NeoX's Q, K and V interleaved per head in one projection, Phi's biased
LM head; random weights, odd sizes, a padded batch row.

usage: neox.py BINDIR WORKDIR [SEED] [--target=cpu|nvptx]
               [--gpu-binary=cubin|ptx] [--cases=NAME,...]
       neox.py --write CASE DIR [--set FIELD=JSON]... [--unset FIELD]...
               [--shape TENSOR=d0,d1]...   (only write the model directory
               of CASE: neox, neox_seq, phi, stablelm, stablelm_parallel)
"""

import math
import os
import sys

import numpy as np

import gpt2
import llama
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "pylib"))
from tfc_testing.arrays import random_weights  # noqa: E402
from tfc_testing.harness import start  # noqa: E402
from tfc_testing.reference import (activation, decoder_masks,  # noqa: E402
                                   layer_norm, silu, softmax)

# GPTNeoXForCausalLM: 3 heads of 16, a quarter of each turned (4 features),
# parallel residuals, biases, the untied head embed_out.
NEOX = {"architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox",
        "hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 3,
        "intermediate_size": 100, "vocab_size": 101,
        "max_position_embeddings": 64, "layer_norm_eps": 1e-5,
        "rotary_pct": 0.25, "rotary_emb_base": 10000.0, "hidden_act": "gelu",
        "use_parallel_residual": True, "rope_scaling": None,
        "attention_bias": True, "tie_word_embeddings": False}
# GPTNeoXModel (no prefix): sequential residuals, no attention biases, half
# of each head turned with linear rope scaling, the tanh GELU.
NEOX_SEQ = dict(NEOX, architectures=["GPTNeoXModel"],
                use_parallel_residual=False, attention_bias=False,
                rotary_pct=0.5, hidden_act="gelu_new",
                rope_scaling={"type": "linear", "factor": 2.0})
# PhiForCausalLM: one LayerNorm per block read by attention and MLP (fc1,
# fc2), 4 query heads of 12 on 2 K/V heads, half of each turned (6), the
# LM head's bias.
PHI = {"architectures": ["PhiForCausalLM"], "model_type": "phi",
       "hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4,
       "num_key_value_heads": 2, "intermediate_size": 100, "vocab_size": 101,
       "max_position_embeddings": 64, "layer_norm_eps": 1e-5,
       "partial_rotary_factor": 0.5, "rope_theta": 10000.0,
       "hidden_act": "gelu_new", "rope_scaling": None, "qk_layernorm": False,
       "tie_word_embeddings": False}
# StableLmForCausalLM: LLaMA's gated MLP, Q, K and V biased
# (use_qkv_bias), a quarter of each head turned, sequential residuals.
STABLELM = {"architectures": ["StableLmForCausalLM"], "model_type": "stablelm",
            "hidden_size": 48, "num_hidden_layers": 2,
            "num_attention_heads": 3, "num_key_value_heads": 1,
            "intermediate_size": 100, "vocab_size": 101,
            "max_position_embeddings": 64, "layer_norm_eps": 1e-5,
            "partial_rotary_factor": 0.25, "rope_theta": 10000.0,
            "hidden_act": "silu", "rope_scaling": None,
            "use_qkv_bias": True, "qk_layernorm": False,
            "use_parallel_residual": False, "tie_word_embeddings": False}
# ... StableLmModel with parallel residuals (one norm per block).
STABLELM_PARALLEL = dict(STABLELM, architectures=["StableLmModel"],
                         use_parallel_residual=True, use_qkv_bias=False)
BATCH, SEQ = 2, 13
CASES = [("neox", NEOX), ("neox_seq", NEOX_SEQ), ("phi", PHI),
         ("stablelm", STABLELM), ("stablelm_parallel", STABLELM_PARALLEL)]


def family(cfg):
    return cfg["model_type"]


def head_dim(cfg):
    return cfg["hidden_size"] // cfg["num_attention_heads"]


def kv_heads(cfg):
    return cfg.get("num_key_value_heads") or cfg["num_attention_heads"]


def parallel(cfg):
    return family(cfg) == "phi" or \
        cfg.get("use_parallel_residual", family(cfg) == "gpt_neox")


def prefix_of(cfg):
    if not cfg["architectures"][0].endswith("ForCausalLM"):
        return ""
    return "gpt_neox." if family(cfg) == "gpt_neox" else "model."


def names(cfg):
    """The tensors' names: (embeddings, attention, Q/K/V, out, MLP in,
    MLP out, final norm, head)."""
    if family(cfg) == "gpt_neox":
        return ("embed_in", "attention", "query_key_value", "dense",
                "dense_h_to_4h", "dense_4h_to_h", "final_layer_norm",
                "embed_out")
    if family(cfg) == "phi":
        return ("embed_tokens", "self_attn", None, "dense", "fc1", "fc2",
                "final_layernorm", "lm_head")
    return ("embed_tokens", "self_attn", None, "o_proj", "up_proj",
            "down_proj", "norm", "lm_head")


def weights(rng, cfg, prefix):
    h, inner, d = cfg["hidden_size"], cfg["intermediate_size"], head_dim(cfg)
    hq, hkv = cfg["num_attention_heads"], kv_heads(cfg)
    embed, attn, qkv, out, up, down, final, head = names(cfg)
    neox, phi = family(cfg) == "gpt_neox", family(cfg) == "phi"
    w = {prefix + embed + ".weight": (cfg["vocab_size"], h),
         prefix + final + ".weight": (h,), prefix + final + ".bias": (h,)}
    if prefix and not cfg.get("tie_word_embeddings"):
        w[head + ".weight"] = (cfg["vocab_size"], h)
    if phi:
        w[head + ".bias"] = (cfg["vocab_size"],)
    attn_bias = cfg.get("attention_bias", True) if neox else phi
    qkv_bias = attn_bias or cfg.get("use_qkv_bias", False)
    for l in range(cfg["num_hidden_layers"]):
        p = prefix + "layers.%d." % l
        proj = {qkv: (3 * hq * d, h)} if neox else \
            {"q_proj": (hq * d, h), "k_proj": (hkv * d, h),
             "v_proj": (hkv * d, h)}
        for name, shape in proj.items():
            w[p + attn + "." + name + ".weight"] = shape
            if qkv_bias:
                w[p + attn + "." + name + ".bias"] = (shape[0],)
        w[p + attn + "." + out + ".weight"] = (h, hq * d)
        if attn_bias:
            w[p + attn + "." + out + ".bias"] = (h,)
        mlp = {up: (inner, h), down: (h, inner)}
        if family(cfg) == "stablelm":
            mlp["gate_proj"] = (inner, h)
        for name, shape in mlp.items():
            w[p + "mlp." + name + ".weight"] = shape
            if family(cfg) != "stablelm":
                w[p + "mlp." + name + ".bias"] = (shape[0],)
        norms = ["input_layernorm"]
        if not (parallel(cfg) and family(cfg) != "gpt_neox"):
            norms.append("post_attention_layernorm")
        for n in norms:
            w[p + n + ".weight"] = (h,)
            w[p + n + ".bias"] = (h,)
    return random_weights(rng, w, (embed, head))


def rope_config(cfg):
    """The fields llama.rotary reads, under their LLaMA names."""
    if family(cfg) != "gpt_neox":
        return cfg
    return dict(cfg, rope_theta=cfg["rotary_emb_base"],
                partial_rotary_factor=cfg["rotary_pct"])


def reference(cfg, w, ids, mask, kv=None):
    """The model's last hidden state in float64 (transformers' forward,
    eager attention); each layer's keys (after the rotary embedding) and
    values [B, kv heads, S, D] appended to `kv` when given."""
    prefix = prefix_of(cfg)
    w = {k[len(prefix):] if prefix and k.startswith(prefix) else k:
         v.astype(np.float64) for k, v in w.items()}
    embed, attn, qkv, out, up, down, final, _ = names(cfg)
    hq, hkv, d = cfg["num_attention_heads"], kv_heads(cfg), head_dim(cfg)
    eps = cfg["layer_norm_eps"]
    b, s = ids.shape
    rope = llama.rotary(rope_config(cfg), s)

    causal_mask, _ = decoder_masks(mask, s)

    def lin(a, name):
        y = a @ w[name + ".weight"].T
        return y + w[name + ".bias"] if name + ".bias" in w else y

    def norm(x, name):
        return layer_norm(x, w[name + ".weight"], w[name + ".bias"], eps)

    def heads(t, n):
        return t.reshape(b, s, n, d).transpose(0, 2, 1, 3)

    x = w[embed + ".weight"][ids]
    for l in range(cfg["num_hidden_layers"]):
        p = "layers.%d." % l
        a = norm(x, p + "input_layernorm")
        if qkv:  # GPT-NeoX: [heads, 3 * d] per token
            t = lin(a, p + attn + "." + qkv).reshape(b, s, hq, 3 * d)
            q, k, v = (t[..., i * d:(i + 1) * d].transpose(0, 2, 1, 3)
                       for i in range(3))
        else:
            q = heads(lin(a, p + attn + ".q_proj"), hq)
            k = heads(lin(a, p + attn + ".k_proj"), hkv)
            v = heads(lin(a, p + attn + ".v_proj"), hkv)
        q, k = rope(q), rope(k)
        if kv is not None:
            kv.append((k, v))
        k, v = (np.repeat(t, hq // hkv, axis=1) for t in (k, v))
        ctx = softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) +
                      causal_mask) @ v
        attended = lin(ctx.transpose(0, 2, 1, 3).reshape(b, s, hq * d),
                       p + attn + "." + out)

        def mlp(m):
            if family(cfg) == "stablelm":
                return lin(silu(lin(m, p + "mlp.gate_proj")) *
                           lin(m, p + "mlp." + up), p + "mlp." + down)
            return lin(activation(cfg["hidden_act"],
                                       lin(m, p + "mlp." + up)),
                       p + "mlp." + down)
        if parallel(cfg):
            m = norm(x, p + "post_attention_layernorm") \
                if family(cfg) == "gpt_neox" else a
            x = x + attended + mlp(m)
        else:
            x = x + attended
            x = x + mlp(norm(x, p + "post_attention_layernorm"))
    return norm(x, final)


def write_model(directory, rng, cfg, shapes=None):
    """config.json and model.safetensors of a random model of `cfg` in
    `directory`; `shapes` replaces the shapes of some tensors. Returns the
    weights."""
    return gpt2.write_directory(directory, rng, cfg,
                                weights(rng, cfg, prefix_of(cfg)), shapes)


def main():
    if sys.argv[1] == "--write":
        return gpt2.write_only(sys.argv[3:], dict(CASES)[sys.argv[2]],
                               write_model, prefix_of)
    h, rng, target = start(sys.argv[1:])
    h.check_cases(rng, CASES, write_model, reference, BATCH, SEQ)
    # The LM heads: GPT-NeoX's embed_out, Phi's lm_head with its bias.
    for name, cfg in (("neox", NEOX), ("phi", PHI)):
        if not h.wants(name + "_logits"):
            continue
        model, w, ids, mask = h.random_model(
            rng, write_model, name + "_logits", cfg, BATCH, SEQ, 3)
        head = names(cfg)[-1]
        ref = reference(cfg, w, ids, mask) @ \
            w[head + ".weight"].astype(np.float64).T
        if head + ".bias" in w:
            ref = ref + w[head + ".bias"]
        for dtype, tol in (("f32", 1e-4), ("f16", 10 * 2.0**-11)):
            lib, _ = h.build_hf("%s_logits_%s" % (name, dtype), model, BATCH,
                                SEQ, True, ["--dtype=" + dtype,
                                            "--output=logits"])
            h.expect_close("%s %s logits" % (name, dtype),
                           h.run_hf(lib, model, [ids, mask]), ref, tol)
    # The KV cache through GPT-NeoX's interleaved projection and Phi's
    # parallel block: prefill, a chunk, a decode step; one build for every
    # step over a fixed-size cache.
    for name, cfg in (("neox", NEOX), ("phi", PHI)):
        if not h.wants(name + "_kv"):
            continue
        model, w, ids, mask = h.random_model(rng, write_model, name + "_kv",
                                             cfg, BATCH, SEQ, 3)
        h.check_kv_cache(name, reference, cfg, cfg["num_hidden_layers"],
                         model, w, ids, mask, "f32", 1e-4)
        h.check_fixed_cache(name, reference, cfg, cfg["num_hidden_layers"],
                            model, w, ids, mask, "f32", 1e-4)
    h.finish()


if __name__ == "__main__":
    main()
