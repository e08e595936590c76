"""Marian, BART and mBART encoder-decoders imported from config.json +
model.safetensors (tfc-compile --hf --decoder-seq-len), fused and unfused,
against the float64 numpy model of tests/pylib/tfc_testing/reference.py
(encoder_decoder, written from transformers' modeling_marian.py,
modeling_bart.py and modeling_mbart.py): random weights, odd sizes (a
7-token source with a padded row, 5 decoder tokens, heads of 10 and 8
features), each family's activation; the whole model in f32, f16 and
bf16, the logits, the encoder and decoder parts (--part), the decoder part
with a KV cache after a past, generation's builds (the encoder part with
the cross-attention keys and values, one decoder step over a fixed cache,
--cross-kv --position-ids) in f32 and bf16, BART built for several batch
sizes and lengths, and Marian with a token table per stack.

usage: encdec.py BINDIR WORKDIR [SEED]
                 [--cases=marian,bart,mbart,variants,marian_unshared]
       encdec.py --write FAMILY DIR [--set FIELD=JSON]... [--drop TENSOR]...
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

BASE = {"d_model": 40, "encoder_layers": 2, "decoder_layers": 2,
        "encoder_attention_heads": 4, "decoder_attention_heads": 5,
        "encoder_ffn_dim": 56, "decoder_ffn_dim": 72, "vocab_size": 61,
        "max_position_embeddings": 24, "pad_token_id": 1, "bos_token_id": 0,
        "eos_token_id": 2, "decoder_start_token_id": 2,
        "forced_eos_token_id": 2, "is_encoder_decoder": True,
        "tie_word_embeddings": True}
# MarianMTModel (the "model." layout, final_logits_bias, sinusoidal
# positions, SiLU, scaled embeddings), BartModel (no prefix, no bias, the
# erf GELU), MBartForConditionalGeneration (pre-LN, ReLU, scaled).
CASES = {
    "marian": dict(BASE, architectures=["MarianMTModel"],
                   model_type="marian", activation_function="swish",
                   scale_embedding=True,
                   share_encoder_decoder_embeddings=True,
                   decoder_vocab_size=61),
    "bart": dict(BASE, architectures=["BartModel"], model_type="bart",
                 activation_function="gelu", scale_embedding=False),
    "mbart": dict(BASE, architectures=["MBartForConditionalGeneration"],
                  model_type="mbart", activation_function="relu",
                  scale_embedding=True),
}
# Marian with a token table per stack (share_encoder_decoder_embeddings
# false), the decoder's and the head's of 53 rows.
UNSHARED = dict(CASES["marian"], share_encoder_decoder_embeddings=False,
                decoder_vocab_size=53)
BATCH, SEQ, DEC = 2, 7, 5


def prefix(cfg):
    return "" if cfg["architectures"][0].endswith("Model") and \
        not cfg["architectures"][0].endswith("MTModel") else "model."


def shapes(cfg):
    """{name: shape} of the model's tensors, as transformers saves them."""
    d, kind = cfg["d_model"], cfg["model_type"]
    p = prefix(cfg)
    shared = cfg.get("share_encoder_decoder_embeddings", True)
    target = cfg["vocab_size"] if shared else cfg["decoder_vocab_size"]
    out = {p + "shared.weight": (cfg["vocab_size"], d)} if shared else {
        p + "encoder.embed_tokens.weight": (cfg["vocab_size"], d),
        p + "decoder.embed_tokens.weight": (target, d)}
    if p:
        out["final_logits_bias"] = (1, target)
    for stack in ("encoder", "decoder"):
        s = p + stack + "."
        if kind != "marian":
            out[s + "embed_positions.weight"] = (
                cfg["max_position_embeddings"] + 2, d)
            out[s + "layernorm_embedding.weight"] = (d,)
            out[s + "layernorm_embedding.bias"] = (d,)
        ffn = cfg[stack + "_ffn_dim"]
        attns = ["self_attn"] + (["encoder_attn"] if stack == "decoder"
                                 else [])
        for l in range(cfg[stack + "_layers"]):
            q = s + "layers.%d." % l
            for a in attns:
                for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
                    out[q + a + "." + proj + ".weight"] = (d, d)
                    out[q + a + "." + proj + ".bias"] = (d,)
                out[q + a + "_layer_norm.weight"] = (d,)
                out[q + a + "_layer_norm.bias"] = (d,)
            out.update({q + "fc1.weight": (ffn, d), q + "fc1.bias": (ffn,),
                        q + "fc2.weight": (d, ffn), q + "fc2.bias": (d,),
                        q + "final_layer_norm.weight": (d,),
                        q + "final_layer_norm.bias": (d,)})
        if kind == "mbart":
            out[s + "layer_norm.weight"] = (d,)
            out[s + "layer_norm.bias"] = (d,)
    return out


def write_model(directory, rng, cfg, drop=()):
    """config.json and model.safetensors of a random model of `cfg` in
    `directory`, without the tensors in `drop`; returns the weights by name
    without the "model." prefix."""
    w = random_weights(rng, shapes(cfg),
                       ("shared", "embed_positions", "embed_tokens"))
    if cfg.get("scale_embedding"):
        # Token rows of norm about 1 once scaled by sqrt(d_model), as a
        # trained model's are: unit-variance rows scaled up make Marian's
        # first attention (no LayerNorm before it) pick its keys so sharply
        # that rounding to bf16 flips which one, in PyTorch as in tfc.
        for k in w:
            if k.endswith(("shared.weight", "embed_tokens.weight")):
                w[k] = (w[k] / np.sqrt(cfg["d_model"])).astype(np.float32)
    if "final_logits_bias" in w:
        w["final_logits_bias"] = (0.1 * rng.standard_normal(
            w["final_logits_bias"].shape)).astype(np.float32)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(cfg, f)
    safetensors_file.write_arrays(
        os.path.join(directory, "model.safetensors"),
        {k: v for k, v in w.items() if k not in drop}, {"format": "pt"})
    p = prefix(cfg)
    return {k[len(p):] if p and k.startswith(p) else k: v
            for k, v in w.items()}


def write_only(args):
    """FAMILY DIR [--set FIELD=JSON]... [--drop TENSOR]..."""
    encdec.write_only("encdec.py", args,
                      dict(CASES, marian_unshared=UNSHARED), write_model)


def rounded(x, dtype):
    """x rounded to `dtype` (as the model holds a table of that type)."""
    return rounded_weights({"x": x.astype(np.float32)}, dtype)["x"].astype(
        np.float64)


def check_family(h, rng, name):
    cfg = CASES[name]
    model = h.path(name)
    w = write_model(model, rng, cfg)
    ids, mask = random_tokens(rng, cfg["vocab_size"], BATCH, SEQ, 2)
    dec = rng.integers(0, cfg["vocab_size"], (BATCH, DEC)).astype(np.int64)

    def ref(dtype, **kw):
        return reference.encoder_decoder(
            cfg, rounded_weights(w, dtype), ids, mask, dec,
            positions=lambda n, d: rounded(reference.marian_positions(n, d),
                                           dtype), **kw)

    encdec.check_whole(h, name, model, ids, mask, dec, ("f32", "f16", "bf16"),
                       lambda dtype: ref(dtype)[1])
    encoded, hidden = ref("f32")
    # The LM head: tied to the token table, plus final_logits_bias.
    encdec.check_logits(h, name, model, ids, mask, dec,
                        reference.encoder_decoder_logits(cfg, w, hidden))
    encdec.check_parts(h, name, model, ids, mask, dec, encoded, hidden)
    encdec.check_past(h, name, model, ids, mask, dec, DEC - 2,
                      lambda kv: ref("f32", kv=kv))

    def cross(dtype, encoded):
        """Each decoder layer's encoder_attn keys and values."""
        rw = rounded_weights(w, dtype)
        p = "decoder.layers.%d.encoder_attn.%s."
        return [tuple(reference._heads(
            encoded @ rw[p % (l, n) + "weight"].astype(np.float64).T +
            rw[p % (l, n) + "bias"], cfg["decoder_attention_heads"])
            for n in ("k_proj", "v_proj"))
            for l in range(cfg["decoder_layers"])]

    encdec.check_step(h, name, model, ids, mask, dec,
                      lambda dtype, kv: ref(dtype, kv=kv), cross)


def check_variants(h, rng):
    """BART built for batch sizes 1 and 4 run on 3 sequences, and for
    source lengths 4 and 7 run on 6 tokens (padded to 7, the padding
    masked): each as the reference of what it was given."""
    cfg = CASES["bart"]
    model = h.path("bart_variants")
    w = write_model(model, rng, cfg)
    for flag, sizes, b, s in (("--batch", "1,4", 3, SEQ),
                              ("--seq-len", "4,7", BATCH, 6)):
        ids, mask = random_tokens(rng, cfg["vocab_size"], b, s, 2)
        dec = rng.integers(0, cfg["vocab_size"], (b, DEC))
        lib, summary = h.build_hf("bart_variants", model, BATCH, SEQ, True,
                                  ["--decoder-seq-len", str(DEC), flag,
                                   sizes])
        print(summary)
        h.expect_close("bart %s %s, %d x %d tokens" % (flag, sizes, b, s),
                       h.run_hf(lib, model, [ids, mask, dec]),
                       reference.encoder_decoder(cfg, w, ids, mask, dec)[1],
                       1e-4)


def check_unshared(h, rng):
    """Marian with a token table per stack: the whole model's hidden state
    and logits, f32, fused."""
    cfg, name = UNSHARED, "marian_unshared"
    model = h.path(name)
    w = write_model(model, rng, cfg)
    ids, mask = random_tokens(rng, cfg["vocab_size"], BATCH, SEQ, 2)
    dec = rng.integers(0, cfg["decoder_vocab_size"], (BATCH, DEC))
    hidden = reference.encoder_decoder(cfg, w, ids, mask, dec)[1]
    for output, expected in (
            ("hidden", hidden),
            ("logits", reference.encoder_decoder_logits(cfg, w, hidden))):
        lib, _ = h.build_hf(name + "_" + output, model, BATCH, SEQ, True,
                            ["--decoder-seq-len", str(DEC),
                             "--output=" + output])
        h.expect_close("%s %s" % (name, output),
                       h.run_hf(lib, model, [ids, mask, dec]), expected, 1e-4)


def check_quantized(h, rng):
    """BART built with --quantize-weights=int8 and =int4 (every projection
    of both stacks, cross-attention's included), and with
    --quantize-activations=int8: the decoder's last hidden state against
    the reference on the weights (and activations) as the build quantizes
    them, fused and unfused."""
    cfg = CASES["bart"]
    model = h.path("bart_quantized")
    w = write_model(model, rng, cfg)
    ids, mask = random_tokens(rng, cfg["vocab_size"], BATCH, SEQ, 2)
    dec = rng.integers(0, cfg["vocab_size"], (BATCH, DEC)).astype(np.int64)
    h.check_quantized(
        "bart hidden",
        lambda wts, bits, act: reference.encoder_decoder(
            cfg, wts, ids, mask, dec, quantize=act)[1],
        model, w, [ids, mask, dec],
        {n: 1 for n in w if n.endswith(("proj.weight", "fc1.weight",
                                        "fc2.weight"))},
        1e-4, ["--decoder-seq-len", str(DEC)])


def main():
    if sys.argv[1] == "--write":
        return write_only(sys.argv[2:])
    h, rng, target = start(sys.argv[1:])
    for name in CASES:
        if h.wants(name):
            check_family(h, rng, name)
    if h.wants("variants"):
        check_variants(h, rng)
    if h.wants("marian_unshared"):
        check_unshared(h, rng)
    if h.wants("quantized") and target == "cpu":
        check_quantized(h, rng)
    h.finish()


if __name__ == "__main__":
    main()
