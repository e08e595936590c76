"""A GPT-2 decoder imported from config.json + model.safetensors (tfc-compile
--hf), fused and unfused, against a float64 numpy GPT-2 written from
transformers' modeling_gpt2.py (eager attention): random weights, odd
sizes, a padded batch row, the tanh GELU.

usage: gpt2.py BINDIR WORKDIR [SEED] [--target=cpu|nvptx]
               [--gpu-binary=cubin|ptx]
       gpt2.py --write DIR [--set FIELD=JSON]... [--unset FIELD]...
               [--shape TENSOR=d0,d1]...   (only write the model directory)
"""

import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "pylib"))
from tfc_testing import safetensors_file  # noqa: E402
from tfc_testing.arrays import bf16_to_f32, random_tokens  # noqa: E402
from tfc_testing.harness import start  # noqa: E402
from tfc_testing.reference import (activation, layer_norm,  # noqa: E402
                                   quantized_weight, softmax)

CFG = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
       "n_embd": 48, "n_layer": 2, "n_head": 3, "n_positions": 40,
       "vocab_size": 101, "n_inner": None, "layer_norm_epsilon": 1e-5,
       "activation_function": "gelu_new"}
BATCH, SEQ = 2, 13


def weights(rng, cfg, prefix="transformer."):
    h, inner = cfg["n_embd"], cfg["n_inner"] or 4 * cfg["n_embd"]
    w = {prefix + "wte.weight": (cfg["vocab_size"], h),
         prefix + "wpe.weight": (cfg["n_positions"], h),
         prefix + "ln_f.weight": (h,), prefix + "ln_f.bias": (h,)}
    for l in range(cfg["n_layer"]):
        p = prefix + "h.%d." % l
        w.update({p + "ln_1.weight": (h,), p + "ln_1.bias": (h,),
                  p + "attn.c_attn.weight": (h, 3 * h),
                  p + "attn.c_attn.bias": (3 * h,),
                  p + "attn.c_proj.weight": (h, h),
                  p + "attn.c_proj.bias": (h,),
                  p + "ln_2.weight": (h,), p + "ln_2.bias": (h,),
                  p + "mlp.c_fc.weight": (h, inner),
                  p + "mlp.c_fc.bias": (inner,),
                  p + "mlp.c_proj.weight": (inner, h),
                  p + "mlp.c_proj.bias": (h,)})
    out = {}
    for name, shape in w.items():
        x = rng.standard_normal(shape) * (0.3 if len(shape) == 2 else 0.1)
        if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or \
                name.endswith("ln_f.weight"):
            x = x + 1.0
        out[name] = x.astype(np.float32)
    return out


def read_weights(directory):
    """{name: float32 array} of DIR/model.safetensors as write_model wrote
    it."""
    return safetensors_file.read(os.path.join(directory,
                                              "model.safetensors"))


def reference(cfg, w, ids, mask, kv=None, act=None, probs=None):
    """transformers' GPT2Model.forward, eager attention, in float64; each
    block's keys and values [B, heads, S, dh] are appended to `kv` when
    given (its past_key_values), its attention probabilities [B, heads, S,
    S] to `probs`; `act`, when given, maps the input of each Conv1D
    first."""
    act = act or (lambda a: a)
    w = {k[len("transformer."):] if k.startswith("transformer.") else k:
         v.astype(np.float64) for k, v in w.items()}
    h, heads = cfg["n_embd"], cfg["n_head"]
    dh = h // heads
    b, s = ids.shape
    x = w["wte.weight"][ids] + w["wpe.weight"][np.arange(s)][None]
    fmin = np.finfo(np.float32).min
    pad = (1.0 - mask.astype(np.float64))[:, None, None, :] * fmin
    causal = np.tril(np.ones((s, s), dtype=bool))
    for l in range(cfg["n_layer"]):
        p = "h.%d." % l
        a = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"],
                       cfg["layer_norm_epsilon"])
        qkv = act(a) @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = (qkv[..., i * h:(i + 1) * h].reshape(b, s, heads, dh)
                   .transpose(0, 2, 1, 3) for i in range(3))
        if kv is not None:
            kv.append((k, v))
        sc = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh)
        pr = softmax(np.where(causal, sc, fmin) + pad)
        if probs is not None:
            probs.append(pr)
        ctx = pr @ v
        ctx = ctx.transpose(0, 2, 1, 3).reshape(b, s, h)
        x = x + act(ctx) @ w[p + "attn.c_proj.weight"] + \
            w[p + "attn.c_proj.bias"]
        a = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"],
                       cfg["layer_norm_epsilon"])
        m = activation(cfg["activation_function"],
                       act(a) @ w[p + "mlp.c_fc.weight"] +
                       w[p + "mlp.c_fc.bias"])
        x = x + act(m) @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    return layer_norm(x, w["ln_f.weight"], w["ln_f.bias"],
                      cfg["layer_norm_epsilon"])


def write_model(directory, rng, cfg, shapes=None, prefix="transformer."):
    """config.json and model.safetensors of a random GPT-2 in `directory`;
    `shapes` replaces the shapes of some tensors. Returns the weights."""
    w = weights(rng, {**CFG, **{k: v for k, v in cfg.items() if k in CFG}},
                prefix)
    return write_directory(directory, rng, cfg, w, shapes)


def write_directory(directory, rng, cfg, w, shapes=None):
    """`directory` with config.json (`cfg`) and model.safetensors (the
    weights `w`, those named in `shapes` replaced by random ones of the
    shape given). Returns the weights written."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(cfg, f)
    for name, shape in (shapes or {}).items():
        w[name] = rng.standard_normal(shape).astype(np.float32)
    safetensors_file.write_arrays(os.path.join(directory,
                                               "model.safetensors"), w,
                                  {"format": "pt"})
    return w


def write_only(args, base=CFG, write=None,
               prefix=lambda cfg: "transformer."):
    """DIR [--set FIELD=JSON]... [--unset FIELD]... [--shape TENSOR=d0,d1]...:
    writes the model directory alone (`write`, default write_model, from
    `base` changed by the flags); a --shape tensor is named without the
    prefix the final config's layout gives (`prefix(cfg)`)."""
    cfg, shapes = dict(base), {}
    directory = args[0]
    it = iter(args[1:])
    for flag in it:
        value = next(it)
        if flag == "--set":
            k, v = value.split("=", 1)
            cfg[k] = json.loads(v)
        elif flag == "--unset":
            cfg.pop(value, None)
        elif flag == "--shape":
            k, v = value.split("=", 1)
            shapes[k] = tuple(int(d) for d in v.split(","))
        else:
            sys.exit("%s: unknown flag %s" % (os.path.basename(sys.argv[0]),
                                              flag))
    (write or write_model)(directory, np.random.default_rng(1), cfg,
                           {prefix(cfg) + k: v for k, v in shapes.items()})


def main():
    if sys.argv[1] == "--write":
        return write_only(sys.argv[2:])
    h, rng, target = start(sys.argv[1:])
    # GPT2LMHeadModel's layout ("transformer." prefix, the tanh GELU), and
    # GPT2Model's (no prefix) with the erf GELU and an odd n_inner.
    # GPT2LMHeadModel's head (tied to wte): the logits.
    model = h.path("gpt2_logits")
    w = write_model(model, rng, CFG)
    ids, mask = random_tokens(rng, CFG["vocab_size"], BATCH, SEQ, 4)
    ref = reference(CFG, w, ids, mask) @ \
        w["transformer.wte.weight"].astype(np.float64).T
    lib, _ = h.build_hf("gpt2_logits", model, BATCH, SEQ, True,
                        ["--output=logits"])
    h.expect_close("gpt2 logits", h.run_hf(lib, model, [ids, mask]), ref,
                   1e-4)
    h.expect_token_refused("gpt2", lib, model, ids, mask, CFG["vocab_size"])
    if target == "cpu":
        # --quantize-weights: every Conv1D ([in, out]) and the head, which
        # reads the token embedding (the lookup reads it as it is).
        wte = w["transformer.wte.weight"]
        def logits(wts, bits, act):
            x = reference(CFG, wts, ids, mask, act=act)
            return (act(x) if act else x) @ (
                quantized_weight(wte, 1, bits) if bits else
                wte.astype(np.float64)).T
        h.check_quantized(
            "gpt2 logits", logits,
            model, w, [ids, mask],
            {n: 0 for n in w if n.endswith(("c_attn.weight", "c_proj.weight",
                                            "c_fc.weight"))},
            1e-4, ["--output=logits"])
    # The KV cache (prefill, a chunk after a past, one-token decode), f32.
    model = h.path("gpt2_kv")
    w = write_model(model, rng, CFG)
    ids, mask = random_tokens(rng, CFG["vocab_size"], BATCH, SEQ, 3)
    h.check_kv_cache("gpt2", reference, CFG, CFG["n_layer"], model, w, ids,
                     mask, "f32", 1e-4)
    h.check_fixed_cache("gpt2", reference, CFG, CFG["n_layer"], model, w, ids,
                        mask, "f32", 1e-4)
    cases = [("gpt2", CFG, "transformer."),
             ("gpt2_erf", dict(CFG, architectures=["GPT2Model"], n_layer=1,
                               n_inner=100, activation_function="gelu"), "")]
    for name, cfg, prefix in cases:
        model = h.path(name)
        w = write_model(model, rng, cfg, prefix=prefix)
        # right padding in the second row
        ids, mask = random_tokens(rng, cfg["vocab_size"], BATCH, SEQ, 4)
        ref = reference(cfg, w, ids, mask)
        for fused in (True, False):
            lib, summary = h.build_hf(name, model, BATCH, SEQ, fused)
            if fused:
                print(summary)
            out = h.run_hf(lib, model, [ids, mask])
            h.expect_close("%s last hidden state %s" %
                           (name, "fused" if fused else "unfused"), out, ref,
                           1e-4)
        # Computing in f16 and bf16 (--dtype): weights rounded to the type,
        # f32 matmul sums, LayerNorm and GELU in f32. Bounds: 10 units of
        # the type's roundoff (2^-11, 2^-8) on the norm-wise error.
        for dtype, tol in (("f16", 10 * 2.0**-11), ("bf16", 10 * 2.0**-8)):
            for fused in (True, False):
                lib, summary = h.build_hf(name + "_" + dtype, model, BATCH,
                                          SEQ, fused, ["--dtype=" + dtype])
                if fused:
                    print(summary)
                out = h.run_hf(lib, model, [ids, mask])
                # (bf16 travels in .npy as '<u2': numpy has no bf16.)
                h.expect("%s %s: the output is %s" % (name, dtype, dtype),
                         out.dtype == np.dtype(np.float16 if dtype == "f16"
                                               else np.uint16))
                if dtype == "bf16":  # widen the bits to f32
                    out = bf16_to_f32(out)
                h.expect_close("%s last hidden state %s %s" %
                               (name, dtype, "fused" if fused else "unfused"),
                               out, ref, tol)
    h.finish()


if __name__ == "__main__":
    main()
