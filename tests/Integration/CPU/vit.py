"""ViT image encoders imported from config.json + model.safetensors
(tfc-compile --hf, no --seq-len), fused and unfused, in f32 and bf16,
against a float64 numpy model written from transformers' modeling_vit.py
(eager attention): ViTForImageClassification (24x24 images of 8x8 patches,
3 heads of 12, 5 labels; its last hidden state and its logits) and ViTModel
with its pooler (a 24x16 image of 2 channels, no Q/K/V biases, the tanh
GELU); random weights and pixels, a batch of 3; and one library of batch
sizes 2 and 3 run on 3 images and on 1 (padded), on the CPU.

usage: vit.py BINDIR WORKDIR [SEED] [--target=cpu|nvptx]
              [--gpu-binary=cubin|ptx]
       vit.py --write CASE DIR [--set FIELD=JSON]... [--unset FIELD]...
              [--shape TENSOR=d0,d1,...]...   (only write the model
              directory of CASE, its config.json changed by the flags:
              vit_cls, vit_model)
"""

import os
import sys

import numpy as np

import gpt2
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "pylib"))
from tfc_testing.arrays import random_weights, rounded_weights  # noqa: E402
from tfc_testing.harness import start  # noqa: E402
from tfc_testing.reference import (layer_norm, patch_embedding,  # noqa: E402
                                   pre_norm_encoder)

VIT_CLS = {"architectures": ["ViTForImageClassification"],
           "model_type": "vit", "hidden_size": 36, "num_hidden_layers": 2,
           "num_attention_heads": 3, "intermediate_size": 50,
           "hidden_act": "gelu", "layer_norm_eps": 1e-12, "image_size": 24,
           "patch_size": 8, "num_channels": 3, "qkv_bias": True,
           "id2label": {str(i): "LABEL_%d" % i for i in range(5)}}
VIT_MODEL = {k: v for k, v in VIT_CLS.items() if k != "id2label"}
VIT_MODEL.update(architectures=["ViTModel"], image_size=[24, 16],
                 num_channels=2, qkv_bias=False, hidden_act="gelu_new",
                 layer_norm_eps=1e-6, pooler_output_size=20,
                 pooler_act="tanh")
CASES = {"vit_cls": VIT_CLS, "vit_model": VIT_MODEL}
BATCH = 3


def prefix_of(cfg):
    return "vit." if cfg["architectures"][0].endswith("Classification") \
        else ""


def sizes(value):
    """(height, width) of an image_size or patch_size."""
    return tuple(value) if isinstance(value, list) else (value, value)


def tokens(cfg):
    (h, w), (ph, pw) = sizes(cfg["image_size"]), sizes(cfg["patch_size"])
    return 1 + (h // ph) * (w // pw)


def layer_names(l):
    p = "encoder.layer.%d." % l
    a = p + "attention."
    return (p + "layernorm_before", a + "attention.query",
            a + "attention.key", a + "attention.value", a + "output.dense",
            p + "layernorm_after", p + "intermediate.dense",
            p + "output.dense")


def weights(rng, cfg):
    """Random weights under the names transformers' checkpoints use."""
    d, inner = cfg["hidden_size"], cfg["intermediate_size"]
    ph, pw = sizes(cfg["patch_size"])
    prefix = prefix_of(cfg)
    emb = "embeddings."
    shapes = {emb + "cls_token": (1, 1, d),
              emb + "position_embeddings": (1, tokens(cfg), d),
              emb + "patch_embeddings.projection.weight":
              (d, cfg["num_channels"], ph, pw),
              emb + "patch_embeddings.projection.bias": (d,),
              "layernorm.weight": (d,), "layernorm.bias": (d,)}
    for l in range(cfg["num_hidden_layers"]):
        n1, q, k, v, o, n2, fc1, fc2 = layer_names(l)
        for n, shape in ((q, (d, d)), (k, (d, d)), (v, (d, d)), (o, (d, d)),
                         (fc1, (inner, d)), (fc2, (d, inner))):
            shapes[n + ".weight"] = shape
            if n in (o, fc1, fc2) or cfg.get("qkv_bias", True):
                shapes[n + ".bias"] = shape[:1]
        for n in (n1, n2):
            shapes[n + ".weight"] = shapes[n + ".bias"] = (d,)
    if "pooler_output_size" in cfg:
        shapes["pooler.dense.weight"] = (cfg["pooler_output_size"], d)
        shapes["pooler.dense.bias"] = (cfg["pooler_output_size"],)
    w = {prefix + n: x for n, x in random_weights(rng, shapes, ()).items()}
    for n in w:  # LayerNorm gains near 1
        if "layernorm" in n and n.endswith(".weight"):
            w[n] = (1 + 0.1 * rng.standard_normal(w[n].shape)).astype(
                np.float32)
    if "id2label" in cfg:
        labels = len(cfg["id2label"])
        w["classifier.weight"] = (rng.standard_normal((labels, d)) /
                                  np.sqrt(d)).astype(np.float32)
        w["classifier.bias"] = (0.1 * rng.standard_normal(labels)).astype(
            np.float32)
    return w


def reference(cfg, w, pixels, output="hidden", probs=None):
    """ViTModel's last hidden state (or ViTForImageClassification's logits,
    or the pooler's output) in float64; `probs`, when given, gets each
    layer's attention probabilities."""
    prefix = prefix_of(cfg)
    w = {k[len(prefix):] if prefix and k.startswith(prefix) else k:
         v.astype(np.float64) for k, v in w.items()}
    eps = cfg["layer_norm_eps"]
    emb = "embeddings."
    h = patch_embedding(pixels, w[emb + "patch_embeddings.projection.weight"],
                        w[emb + "patch_embeddings.projection.bias"])
    cls = np.broadcast_to(w[emb + "cls_token"], (h.shape[0], 1, h.shape[2]))
    h = np.concatenate([cls, h], 1) + w[emb + "position_embeddings"]
    h = pre_norm_encoder(h, w, layer_names, cfg["num_hidden_layers"],
                         cfg["num_attention_heads"], eps, cfg["hidden_act"],
                         probs=probs)
    h = layer_norm(h, w["layernorm.weight"], w["layernorm.bias"], eps)
    if output == "logits":
        return h[:, 0] @ w["classifier.weight"].T + w["classifier.bias"]
    if output == "pooled":
        return np.tanh(h[:, 0] @ w["pooler.dense.weight"].T +
                       w["pooler.dense.bias"])
    return h


def write_model(directory, rng, cfg, shapes=None):
    return gpt2.write_directory(directory, rng, cfg, weights(rng, cfg),
                                shapes)


def write_case(args, cases, weights, prefix_of):
    """--write's CASE DIR [FLAGS]: the directory of cases[CASE] with the
    case's own weights (weights(rng, cfg)), its config.json changed by the
    flags (gpt2.write_only's)."""
    base = cases[args[0]]
    return gpt2.write_only(
        args[1:], base,
        lambda directory, rng, cfg, shapes: gpt2.write_directory(
            directory, rng, cfg, weights(rng, base), shapes),
        lambda cfg: prefix_of(base))


def pixels_for(rng, cfg, batch):
    h, w = sizes(cfg["image_size"])
    return rng.uniform(-1, 1, (batch, cfg["num_channels"], h, w)).astype(
        np.float32)


def main():
    if sys.argv[1] == "--write":
        return write_case(sys.argv[2:], CASES, weights, prefix_of)
    h, rng, _ = start(sys.argv[1:])
    dtypes = (("f32", 1e-4), ("bf16", 10 * 2.0**-8))
    for name, cfg, extra in (("vit_cls", VIT_CLS, "logits"),
                             ("vit_model", VIT_MODEL, "pooled")):
        model = h.path(name)
        w = write_model(model, rng, cfg)
        pixels = pixels_for(rng, cfg, BATCH)
        h.check_builds(name, model, [pixels],
                       lambda dtype: reference(
                           cfg, rounded_weights(w, dtype), pixels),
                       dtypes, "last hidden state")
        h.check_builds(name + "_" + extra, model, [pixels],
                       lambda dtype: reference(
                           cfg, rounded_weights(w, dtype), pixels, extra),
                       dtypes if extra == "logits" else dtypes[:1],
                       extra, ["--output=" + extra])
    if h.target != "cpu":  # several batch sizes build a CPU model only
        h.finish()
    # One library for batch sizes 2 and 3: 3 images, and 1 padded to 2.
    model = h.path("vit_cls")
    w = write_model(model, rng, VIT_CLS)
    lib, _ = h.build_hf("vit_batches", model, "2,3", None, True,
                        ["--output=logits"])
    for batch in (3, 1):
        pixels = pixels_for(rng, VIT_CLS, batch)
        h.expect_close("vit_cls logits, batch %d of a library of batch "
                       "sizes 2 and 3" % batch,
                       h.run_hf(lib, model, [pixels]),
                       reference(VIT_CLS, w, pixels, "logits"), 1e-4)
    h.finish()


if __name__ == "__main__":
    main()
