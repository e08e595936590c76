"""Writes the base model of "Attention Is All You Need" (Vaswani et al.,
2017) as a Hugging Face Marian directory with random weights:
config.json, generation_config.json and model.safetensors.

usage: make_model.py OUT_DIR [--layers N] [--d-model D] [--heads H]
                     [--d-ff F] [--vocab V] [--seed S]

The defaults are the paper's base model: N = 6 encoder and 6 decoder
layers, d_model 512, h = 8 heads of 64, d_ff 2048 (ReLU), sinusoidal
positions, one token table for the source, the target and the output
projection (scaled by sqrt(d_model) on input), post-LN residual blocks;
a vocabulary of V = 4000 ids. MarianMTModel is that architecture (plus a
final_logits_bias, zero here). The weights are drawn from numpy's RNG
(seed S): token rows N(0, 1/d_model) (of norm about 1, sqrt(d_model) once
scaled), matrices N(0, 1/fan_in) (the second feed-forward matrix's rows
centred), small random biases and LayerNorm parameters. Nothing is
downloaded; numpy only.

Token ids follow Marian's convention: 0 is </s> (EOS), V - 1 <pad>, which
also starts the decoder. generation_config.json asks for beam search with
4 beams (the paper's), and bars <pad> from the output and forces EOS at
the last step as released Marian models do.
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "tests", "pylib"))
from tfc_testing import safetensors_file  # noqa: E402


def config(layers, d_model, heads, d_ff, vocab):
    """MarianMTModel's config.json for the paper's hyperparameters."""
    pad = vocab - 1
    return {
        "architectures": ["MarianMTModel"], "model_type": "marian",
        "is_encoder_decoder": True,
        "d_model": d_model,
        "encoder_layers": layers, "decoder_layers": layers,
        "encoder_attention_heads": heads, "decoder_attention_heads": heads,
        "encoder_ffn_dim": d_ff, "decoder_ffn_dim": d_ff,
        "activation_function": "relu",
        "vocab_size": vocab, "decoder_vocab_size": vocab,
        "share_encoder_decoder_embeddings": True,
        "tie_word_embeddings": True, "scale_embedding": True,
        "max_position_embeddings": 512,
        # P_drop = 0.1 in training; inference runs without dropout.
        "dropout": 0.1, "attention_dropout": 0.0, "activation_dropout": 0.0,
        "eos_token_id": 0, "pad_token_id": pad,
        "decoder_start_token_id": pad, "forced_eos_token_id": 0,
        "dtype": "float32",
    }


def generation_config(cfg):
    pad = cfg["pad_token_id"]
    return {"decoder_start_token_id": pad, "eos_token_id": 0,
            "pad_token_id": pad, "forced_eos_token_id": 0,
            "bad_words_ids": [[pad]], "num_beams": 4}


def weights(cfg, rng):
    """{name: f32 array} as transformers saves a MarianMTModel (the tied
    output projection and the sinusoidal tables are not stored)."""
    d, v = cfg["d_model"], cfg["vocab_size"]
    w = {}

    def matrix(name, rows, cols):  # a Linear's weight [out, in] and bias
        w[name + ".weight"] = rng.standard_normal(
            (rows, cols), np.float32) / np.float32(np.sqrt(cols))
        w[name + ".bias"] = 0.02 * rng.standard_normal(rows)

    def layer_norm(name):
        w[name + ".weight"] = 1 + 0.1 * rng.standard_normal(d)
        w[name + ".bias"] = 0.02 * rng.standard_normal(d)

    w["model.shared.weight"] = rng.standard_normal(
        (v, d), np.float32) / np.float32(np.sqrt(d))
    for stack in ("encoder", "decoder"):
        attentions = ["self_attn"] + (["encoder_attn"] if stack == "decoder"
                                      else [])
        ffn = cfg[stack + "_ffn_dim"]
        for i in range(cfg[stack + "_layers"]):
            p = "model.%s.layers.%d." % (stack, i)
            for a in attentions:
                for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
                    matrix(p + a + "." + proj, d, d)
                layer_norm(p + a + "_layer_norm")
            matrix(p + "fc1", ffn, d)
            matrix(p + "fc2", d, ffn)
            # ReLU's outputs are positive: fc2's rows centred, so that the
            # feed-forward block adds no vector common to every token
            # (uncentred, the random model answers every source with the
            # same token).
            fc2 = w[p + "fc2.weight"]
            fc2 -= fc2.mean(1, keepdims=True)
            layer_norm(p + "final_layer_norm")
    w["final_logits_bias"] = np.zeros((1, v))
    return {k: x.astype(np.float32) for k, x in w.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--d-ff", type=int, default=2048)
    p.add_argument("--vocab", type=int, default=4000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    for flag, value, least in (("--layers", args.layers, 1),
                               ("--heads", args.heads, 1),
                               ("--d-ff", args.d_ff, 1),
                               ("--vocab", args.vocab, 2)):
        if value < least:
            sys.exit("make_model.py: %s %d: at least %d" % (flag, value,
                                                             least))
    if args.d_model < 1 or args.d_model % args.heads:
        sys.exit("make_model.py: --d-model %d: a positive multiple of "
                 "--heads %d" % (args.d_model, args.heads))
    cfg = config(args.layers, args.d_model, args.heads, args.d_ff,
                 args.vocab)
    os.makedirs(args.out, exist_ok=True)
    for name, obj in (("config.json", cfg),
                      ("generation_config.json", generation_config(cfg))):
        with open(os.path.join(args.out, name), "w") as f:
            json.dump(obj, f, indent=2)
            f.write("\n")
    safetensors_file.write_arrays(
        os.path.join(args.out, "model.safetensors"),
        weights(cfg, np.random.default_rng(args.seed)), {"format": "pt"})


if __name__ == "__main__":
    main()
