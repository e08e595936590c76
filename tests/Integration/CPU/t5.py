"""T5 and T5 v1.1 (Flan-T5's layout) imported from config.json +
model.safetensors (tfc-compile --hf --decoder-seq-len), fused and unfused,
against the float64 numpy model of tests/pylib/tfc_testing/reference.py
(t5, written from transformers' modeling_t5.py): random weights, odd sizes
(a 7-token source with a padded row, 5 decoder tokens, 37 tokens, heads of
8 features), T5's ReLU feed-forward and tied, rescaled LM head, T5 v1.1's
gated GELU and untied lm_head; the whole model in f32 and bf16, the
logits, the encoder and decoder parts (--part), the decoder part with a KV
cache after a past, generation's builds (the encoder part with the
cross-attention keys and values, one decoder step over a fixed cache whose
rows are at different positions: the position bias gathered at run time)
in f32 and bf16, and lengths past relative_attention_max_distance
with heads narrower than d_model / num_heads.

usage: t5.py BINDIR WORKDIR [SEED] [--cases=t5,t5v11,long]
       t5.py --write FAMILY DIR [--set FIELD=JSON]... [--drop TENSOR]...
             (only write the model directory)
"""

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "pylib"))
from tfc_testing import encdec, reference, safetensors_file  # noqa: E402
from tfc_testing.arrays import (random_tokens, random_weights,  # noqa: E402
                                rounded_weights)
from tfc_testing.harness import start  # noqa: E402

BASE = {"d_model": 32, "d_kv": 8, "num_heads": 4, "d_ff": 48,
        "num_layers": 2, "num_decoder_layers": 2, "vocab_size": 37,
        "relative_attention_num_buckets": 8,
        "relative_attention_max_distance": 16, "layer_norm_epsilon": 1e-6,
        "is_encoder_decoder": True, "pad_token_id": 0, "eos_token_id": 1,
        "decoder_start_token_id": 0, "model_type": "t5",
        "architectures": ["T5ForConditionalGeneration"]}
# T5 (ReLU, the head tied to the token table and the decoder's output
# scaled by d_model^-0.5: no lm_head.weight in the file, as transformers
# saves it) and T5 v1.1 / Flan-T5 (gated GELU, lm_head.weight of its own,
# no scaling).
CASES = {
    "t5": dict(BASE, feed_forward_proj="relu"),
    "t5v11": dict(BASE, feed_forward_proj="gated-gelu",
                  tie_word_embeddings=False),
}
BATCH, SEQ, DEC = 2, 7, 5
# Lengths past relative_attention_max_distance (16): the last buckets.
LONG_SEQ, LONG_DEC = 19, 18


def shapes(cfg):
    """{name: shape} of the model's tensors, as transformers saves them."""
    d, inner = cfg["d_model"], cfg["num_heads"] * cfg["d_kv"]
    ff = cfg["d_ff"]
    out = {"shared.weight": (cfg["vocab_size"], d)}
    if cfg.get("tie_word_embeddings", True) is False:
        out["lm_head.weight"] = (cfg["vocab_size"], d)
    gated = cfg.get("feed_forward_proj", "relu").startswith("gated-")
    for stack, layers in (("encoder", cfg["num_layers"]),
                          ("decoder", cfg.get("num_decoder_layers") or
                           cfg["num_layers"])):
        attns = ["SelfAttention"] + (["EncDecAttention"]
                                     if stack == "decoder" else [])
        for l in range(layers):
            p = "%s.block.%d.layer." % (stack, l)
            for i, a in enumerate(attns):
                for proj in "qkv":
                    out["%s%d.%s.%s.weight" % (p, i, a, proj)] = (inner, d)
                out["%s%d.%s.o.weight" % (p, i, a)] = (d, inner)
                out["%s%d.layer_norm.weight" % (p, i)] = (d,)
            if l == 0:
                out[p + "0.SelfAttention.relative_attention_bias.weight"] = (
                    cfg["relative_attention_num_buckets"], cfg["num_heads"])
            f = "%s%d." % (p, len(attns))
            for wi in (("wi_0", "wi_1") if gated else ("wi",)):
                out[f + "DenseReluDense." + wi + ".weight"] = (ff, d)
            out[f + "DenseReluDense.wo.weight"] = (d, ff)
            out[f + "layer_norm.weight"] = (d,)
        out[stack + ".final_layer_norm.weight"] = (d,)
    return out


def write_model(directory, rng, cfg, drop=()):
    """config.json and model.safetensors of a random model of `cfg` in
    `directory`, without the tensors in `drop`; returns the weights by
    name."""
    w = random_weights(rng, shapes(cfg),
                       ("shared", "lm_head", "relative_attention_bias"))
    # The projections at the scales of T5's _init_weights: N(0, 1) /
    # sqrt(fan-in), the queries d_kv^-0.5 smaller still (T5 folds the
    # scores' scale into them). random_weights' 1.5 / sqrt(fan-in), with
    # unscaled scores, makes attention so sharp that rounding to bf16 flips
    # which keys it picks, in PyTorch as in tfc.
    for k in w:
        if w[k].ndim == 2 and k.endswith(
                (".q.weight", ".k.weight", ".v.weight", ".o.weight",
                 "wi.weight", "wi_0.weight", "wi_1.weight", "wo.weight")):
            q = np.sqrt(cfg["d_kv"]) if k.endswith(".q.weight") else 1.0
            w[k] = (w[k] / (1.5 * q)).astype(np.float32)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(cfg, f)
    safetensors_file.write_arrays(
        os.path.join(directory, "model.safetensors"),
        {k: v for k, v in w.items() if k not in drop}, {"format": "pt"})
    return w


def write_only(args):
    """FAMILY DIR [--set FIELD=JSON]... [--drop TENSOR]..."""
    encdec.write_only("t5.py", args, CASES, write_model)


def cross_keys_values(cfg, w):
    """cross(dtype, encoded): each decoder layer's EncDecAttention keys
    and values of `encoded`, the weights rounded to dtype."""
    def cross(dtype, encoded):
        rw = rounded_weights(w, dtype)
        p = "decoder.block.%d.layer.1.EncDecAttention.%s.weight"
        return [tuple(reference._heads(
            encoded @ rw[p % (l, n)].astype(np.float64).T, cfg["num_heads"])
            for n in "kv") for l in range(cfg["num_decoder_layers"])]
    return cross


def check_family(h, rng, name):
    cfg = CASES[name]
    model = h.path(name)
    w = write_model(model, rng, cfg)
    ids, mask = random_tokens(rng, cfg["vocab_size"], BATCH, SEQ, 2)
    dec = rng.integers(0, cfg["vocab_size"], (BATCH, DEC)).astype(np.int64)
    encdec.check_whole(h, name, model, ids, mask, dec, ("f32", "bf16"),
                       lambda dtype: reference.t5(
                           cfg, rounded_weights(w, dtype), ids, mask, dec)[1])
    encoded, hidden = reference.t5(cfg, w, ids, mask, dec)
    # The LM head: T5's tied and rescaled, T5 v1.1's lm_head.weight.
    encdec.check_logits(h, name, model, ids, mask, dec,
                        reference.t5_logits(cfg, w, hidden))
    encdec.check_parts(h, name, model, ids, mask, dec, encoded, hidden)
    encdec.check_past(h, name, model, ids, mask, dec, DEC - 2,
                      lambda kv: reference.t5(cfg, w, ids, mask, dec, kv=kv))
    encdec.check_step(h, name, model, ids, mask, dec,
                      lambda dtype, kv: reference.t5(
                          cfg, rounded_weights(w, dtype), ids, mask, dec,
                          kv=kv), cross_keys_values(cfg, w))


def check_long(h, rng):
    """T5 v1.1 with heads of 6 features (num_heads x d_kv = 24, d_model
    32) on 19 source tokens (3 of the second row padding) and 18 decoder
    tokens, past relative_attention_max_distance both ways: the whole
    model's logits fused and unfused, the decoder part's last 2 tokens
    after a past of 16, and a decoder step at positions 16 and 9."""
    cfg, name = dict(CASES["t5v11"], d_kv=6), "t5_long"
    model = h.path(name)
    w = write_model(model, rng, cfg)
    ids, mask = random_tokens(rng, cfg["vocab_size"], BATCH, LONG_SEQ, 3)
    dec = rng.integers(0, cfg["vocab_size"], (BATCH, LONG_DEC))
    hidden = reference.t5(cfg, w, ids, mask, dec)[1]
    for fused in (True, False):
        lib, _ = h.build_hf(name, model, BATCH, LONG_SEQ, fused,
                            ["--decoder-seq-len", str(LONG_DEC),
                             "--output=logits"])
        h.expect_close("%s logits %s" % (name, "fused" if fused else
                                         "unfused"),
                       h.run_hf(lib, model, [ids, mask, dec]),
                       reference.t5_logits(cfg, w, hidden), 1e-4)
    encdec.check_past(h, name, model, ids, mask, dec, LONG_DEC - 2,
                      lambda kv: reference.t5(cfg, w, ids, mask, dec, kv=kv),
                      builds=(True,))
    # One decoder step over a 17-slot cache, its rows at positions 16 and
    # 9: the run's distances reach past max_distance.
    encdec.check_step(h, name, model, ids, mask, dec,
                      lambda dtype, kv: reference.t5(cfg, w, ids, mask, dec,
                                                     kv=kv),
                      cross_keys_values(cfg, w), dtypes=("f32",),
                      cap=LONG_DEC - 1, filled=(LONG_DEC - 2, 9))


def main():
    if sys.argv[1] == "--write":
        return write_only(sys.argv[2:])
    h, rng, _ = start(sys.argv[1:])
    for name in CASES:
        if h.wants(name):
            check_family(h, rng, name)
    if h.wants("long"):
        check_long(h, rng)
    h.finish()


if __name__ == "__main__":
    main()
