"""CLIP imported from config.json + model.safetensors (tfc-compile --hf),
fused and unfused, in f32 and bf16, against a float64 numpy model written
from transformers' modeling_clip.py (eager attention): CLIPModel's vision
tower (--part=vision: 24x24 images of 8x8 patches, no patch bias, the
class embedding, pre_layrnorm, quick_gelu, post_layernorm on the class
token, visual_projection, normalised: image_embeds) and text tower
(--part=text: 7 tokens, causal and padding masks, final_layer_norm, the
state at the first EOS token, text_projection, normalised: text_embeds) on
a batch of 3 with a right-padded and a left-padded row; each tower's last
hidden state (--output=hidden); a config of the old EOS rule (eos_token_id
2: the first largest id) with the erf GELU; CLIPVisionModel (under
vision_model.) and CLIPTextModel (no prefix), whose output is the pooled
state.

usage: clip.py BINDIR WORKDIR [SEED] [--target=cpu|nvptx]
               [--gpu-binary=cubin|ptx]
       clip.py --write CASE DIR [--set FIELD=JSON]... [--unset FIELD]...
               [--shape TENSOR=d0,d1,...]...   (only write the model
               directory of CASE, its config.json changed by the flags:
               clip, clip_legacy, clip_vision, clip_text)
"""

import os
import sys

import numpy as np

import gpt2
import vit
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "pylib"))
from tfc_testing.arrays import random_weights, rounded_weights  # noqa: E402
from tfc_testing.harness import start  # noqa: E402
from tfc_testing.reference import (decoder_masks, layer_norm,  # noqa: E402
                                   patch_embedding, pre_norm_encoder)

TEXT = {"model_type": "clip_text_model", "hidden_size": 24,
        "num_hidden_layers": 2, "num_attention_heads": 3,
        "intermediate_size": 40, "vocab_size": 50,
        "max_position_embeddings": 9, "hidden_act": "quick_gelu",
        "layer_norm_eps": 1e-5, "eos_token_id": 3}
VISION = {"model_type": "clip_vision_model", "hidden_size": 32,
          "num_hidden_layers": 2, "num_attention_heads": 2,
          "intermediate_size": 48, "image_size": 24, "patch_size": 8,
          "num_channels": 3, "hidden_act": "quick_gelu",
          "layer_norm_eps": 1e-5}
CLIP = {"architectures": ["CLIPModel"], "model_type": "clip",
        "projection_dim": 20, "text_config": TEXT, "vision_config": VISION}
CLIP_LEGACY = dict(CLIP, text_config=dict(TEXT, eos_token_id=2,
                                          hidden_act="gelu"))
CLIP_VISION = dict(VISION, architectures=["CLIPVisionModel"])
CLIP_TEXT = dict(TEXT, architectures=["CLIPTextModel"])
CASES = {"clip": CLIP, "clip_legacy": CLIP_LEGACY,
         "clip_vision": CLIP_VISION, "clip_text": CLIP_TEXT}
BATCH, SEQ = 3, 7


def layer_names(l):
    p = "encoder.layers.%d." % l
    a = p + "self_attn."
    return (p + "layer_norm1", a + "q_proj", a + "k_proj", a + "v_proj",
            a + "out_proj", p + "layer_norm2", p + "mlp.fc1", p + "mlp.fc2")


def towers(cfg):
    """(vision config, text config) of a case (None where it has not the
    tower) and the prefixes of their tensors."""
    if cfg["model_type"] == "clip":
        return ((cfg["vision_config"], "vision_model."),
                (cfg["text_config"], "text_model."))
    if cfg["model_type"] == "clip_vision_model":
        return (cfg, "vision_model."), (None, None)
    return (None, None), (cfg, "")


def prefix_of(cfg):
    return next(p for c, p in towers(cfg) if c is not None)


def tower_weights(cfg, vision):
    d, inner = cfg["hidden_size"], cfg["intermediate_size"]
    if vision:
        p = cfg["patch_size"]
        shapes = {"embeddings.class_embedding": (d,),
                  "embeddings.patch_embedding.weight":
                  (d, cfg["num_channels"], p, p),
                  "embeddings.position_embedding.weight":
                  (1 + (cfg["image_size"] // p) ** 2, d)}
        norms = ("pre_layrnorm", "post_layernorm")
    else:
        shapes = {"embeddings.token_embedding.weight":
                  (cfg["vocab_size"], d),
                  "embeddings.position_embedding.weight":
                  (cfg["max_position_embeddings"], d)}
        norms = ("final_layer_norm",)
    for l in range(cfg["num_hidden_layers"]):
        n1, q, k, v, o, n2, fc1, fc2 = layer_names(l)
        for n, shape in ((q, (d, d)), (k, (d, d)), (v, (d, d)), (o, (d, d)),
                         (fc1, (inner, d)), (fc2, (d, inner))):
            shapes[n + ".weight"] = shape
            shapes[n + ".bias"] = shape[:1]
        norms += (n1, n2)
    for n in norms:
        shapes[n + ".weight"] = shapes[n + ".bias"] = (d,)
    return shapes, norms


def weights(rng, cfg):
    """Random weights under the names transformers' checkpoints use
    (CLIPModel's logit_scale, a scalar, included)."""
    w = {}
    (vision_cfg, vision_prefix), (text_cfg, text_prefix) = towers(cfg)
    for vision, tower, prefix in ((True, vision_cfg, vision_prefix),
                                  (False, text_cfg, text_prefix)):
        if tower is None:
            continue
        shapes, norms = tower_weights(tower, vision)
        t = random_weights(rng, shapes, ("token_embedding",))
        for n in norms:
            t[n + ".weight"] = (1 + 0.1 * rng.standard_normal(
                t[n + ".weight"].shape)).astype(np.float32)
        w.update({prefix + n: x for n, x in t.items()})
    if cfg["model_type"] == "clip":
        for name, tower in (("visual_projection", cfg["vision_config"]),
                            ("text_projection", cfg["text_config"])):
            d = tower["hidden_size"]
            w[name + ".weight"] = (rng.standard_normal(
                (cfg["projection_dim"], d)) / np.sqrt(d)).astype(np.float32)
        w["logit_scale"] = np.array(2.6592, dtype=np.float32)
    return w


def unprefixed(w, prefix):
    return {k[len(prefix):]: v.astype(np.float64) for k, v in w.items()
            if k.startswith(prefix)}


def vision_reference(cfg, w, pixels, probs=None):
    """CLIPVisionTransformer in float64: (last hidden state, pooled); each
    layer's attention probabilities appended to `probs` when given."""
    eps = cfg["layer_norm_eps"]
    h = patch_embedding(pixels, w["embeddings.patch_embedding.weight"])
    cls = np.broadcast_to(w["embeddings.class_embedding"],
                          (h.shape[0], 1, h.shape[2]))
    h = np.concatenate([cls, h], 1) + w["embeddings.position_embedding.weight"]
    h = layer_norm(h, w["pre_layrnorm.weight"], w["pre_layrnorm.bias"], eps)
    h = pre_norm_encoder(h, w, layer_names, cfg["num_hidden_layers"],
                         cfg["num_attention_heads"], eps, cfg["hidden_act"],
                         probs=probs)
    return h, layer_norm(h[:, 0], w["post_layernorm.weight"],
                         w["post_layernorm.bias"], eps)


def text_reference(cfg, w, ids, mask, probs=None):
    """CLIPTextTransformer in float64: (last hidden state, pooled); each
    layer's attention probabilities appended to `probs` when given."""
    eps = cfg["layer_norm_eps"]
    s = ids.shape[1]
    h = w["embeddings.token_embedding.weight"][ids] + \
        w["embeddings.position_embedding.weight"][:s]
    causal, _ = decoder_masks(mask, s)  # create_causal_mask's
    h = pre_norm_encoder(h, w, layer_names, cfg["num_hidden_layers"],
                         cfg["num_attention_heads"], eps, cfg["hidden_act"],
                         causal, probs)
    h = layer_norm(h, w["final_layer_norm.weight"],
                   w["final_layer_norm.bias"], eps)
    eos = cfg.get("eos_token_id", 49407)
    first = ids.argmax(-1) if eos == 2 else (ids == eos).astype(int).argmax(-1)
    return h, h[np.arange(ids.shape[0]), first]


def reference(cfg, w, inputs, vision, output="embeds", probs=None):
    """A case's output in float64: the tower's normalised projection
    (CLIPModel's image_embeds or text_embeds), its pooled state or its last
    hidden state (output "embeds", "pooled", "hidden"); the tower's
    attention probabilities appended to `probs` when given."""
    tower, prefix = towers(cfg)[0 if vision else 1]
    t = unprefixed(w, prefix)
    last, pooled = vision_reference(tower, t, *inputs, probs) if vision \
        else text_reference(tower, t, *inputs, probs)
    if output == "hidden":
        return last
    if output == "pooled":
        return pooled
    e = pooled @ w[("visual" if vision else "text") +
                   "_projection.weight"].astype(np.float64).T
    return e / np.linalg.norm(e, axis=-1, keepdims=True)


def text_inputs(rng, cfg, left):
    """ids [3, 7] and their mask: row 0 whole, ending in EOS; row 1 with 4
    tokens, EOS the last of them, then 3 of padding; row 2 with two EOS
    (the first counts), after 2 tokens of left padding where `left`. Under
    the old rule (eos_token_id 2) EOS is the largest id."""
    eos = cfg["eos_token_id"]
    vocab = cfg["vocab_size"]
    top = vocab - 1 if eos == 2 else eos
    low = 0 if eos == 2 else eos + 1
    ids = rng.integers(low, vocab - 1, (BATCH, SEQ)).astype(np.int64)
    mask = np.ones((BATCH, SEQ), dtype=np.int64)
    ids[0, 6] = top
    ids[1, 3] = top
    mask[1, 4:] = 0
    ids[2, [4, 6]] = top
    if left:
        mask[2, :2] = 0
    return ids, mask


def write_model(directory, rng, cfg, shapes=None):
    return gpt2.write_directory(directory, rng, cfg, weights(rng, cfg),
                                shapes)


def main():
    if sys.argv[1] == "--write":
        return vit.write_case(sys.argv[2:], CASES, weights, prefix_of)
    h, rng, _ = start(sys.argv[1:])
    dtypes = (("f32", 1e-4), ("bf16", 10 * 2.0**-8))
    model = h.path("clip")
    w = write_model(model, rng, CLIP)
    pixels = [vit.pixels_for(rng, VISION, BATCH)]
    left = text_inputs(rng, TEXT, True)
    right = text_inputs(rng, TEXT, False)

    def check(name, model, cfg, w, inputs, vision, output, dtypes, flags):
        h.check_builds(name, model, inputs,
                       lambda dtype: reference(
                           cfg, rounded_weights(w, dtype), inputs, vision,
                           output),
                       dtypes, output, flags, None if vision else SEQ)
    check("clip_vision", model, CLIP, w, pixels, True, "embeds", dtypes,
          ["--part=vision"])
    check("clip_text", model, CLIP, w, list(left), False, "embeds", dtypes,
          ["--part=text"])
    # The last hidden states; the text's where no row is left-padded (a
    # query that sees only padding keys is defined by tfc's causal -inf,
    # where transformers' finite fill spreads it over the future keys).
    check("clip_vision_hidden", model, CLIP, w, pixels, True, "hidden",
          dtypes[:1], ["--part=vision", "--output=hidden"])
    check("clip_text_hidden", model, CLIP, w, list(right), False, "hidden",
          dtypes[:1], ["--part=text", "--output=hidden"])
    # The old EOS rule and the erf GELU.
    model = h.path("clip_legacy")
    w = write_model(model, rng, CLIP_LEGACY)
    legacy = text_inputs(rng, CLIP_LEGACY["text_config"], True)
    check("clip_legacy_text", model, CLIP_LEGACY, w, list(legacy), False,
          "embeds", dtypes[:1], ["--part=text"])
    # One tower each, their default output the pooled state.
    model = h.path("clip_vision_model")
    w = write_model(model, rng, CLIP_VISION)
    check("clip_vision_model", model, CLIP_VISION, w, pixels, True, "pooled",
          dtypes[:1], [])
    model = h.path("clip_text_model")
    w = write_model(model, rng, CLIP_TEXT)
    check("clip_text_model", model, CLIP_TEXT, w, list(left), False, "pooled",
          dtypes[:1], [])
    h.finish()


if __name__ == "__main__":
    main()
