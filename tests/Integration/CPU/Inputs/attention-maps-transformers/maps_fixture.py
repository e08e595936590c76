"""The small random models whose attention probabilities transformers
recorded (record.py, by hand, with torch) for attention-maps.py to compare
tfc's --attention-maps with (in CI, numpy only).

No weights or inputs are stored: models.json holds each model's
config.json, seed and tensor names and shapes (as transformers'
save_pretrained writes them), the sha256 of the model.safetensors written
from them and the versions that recorded it; expected.npz holds the
probabilities, "MODEL/NAME" (NAME as tfc names its outputs: attentions.L,
encoder_attentions.L, decoder_attentions.L, cross_attentions.L,
vision_attentions.L, text_attentions.L), f32. The weights and inputs are
drawn again here from the seed with numpy.
"""

import hashlib
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "..", "pylib"))
from tfc_testing import safetensors_file  # noqa: E402

MODELS_JSON = os.path.join(HERE, "models.json")
EXPECTED_NPZ = os.path.join(HERE, "expected.npz")

BATCH, SEQ, DEC, PADDING = 2, 7, 5, 2
# name: (config.json, seed). Tiny and odd: 2 layers a stack, heads of 8
# features (T5's of 6, CLIP vision's of 16), LLaMA's 4 query heads on 2
# key/value heads, 7 tokens of which the second row pads the last 2, 5
# decoder tokens, a 16x24 image of 8x8 patches (7 tokens), CLIP's 24x24
# (10 tokens).
MODELS = {
    "bert": ({"architectures": ["BertModel"], "model_type": "bert",
              "hidden_size": 24, "num_hidden_layers": 2,
              "num_attention_heads": 3, "intermediate_size": 40,
              "vocab_size": 53, "max_position_embeddings": 16,
              "type_vocab_size": 2, "hidden_act": "gelu",
              "layer_norm_eps": 1e-12, "pad_token_id": 0}, 101),
    "gpt2": ({"architectures": ["GPT2Model"], "model_type": "gpt2",
              "n_embd": 24, "n_layer": 2, "n_head": 3, "n_inner": 40,
              "vocab_size": 53, "n_positions": 16,
              "activation_function": "gelu_new",
              "layer_norm_epsilon": 1e-5, "bos_token_id": 52,
              "eos_token_id": 52}, 102),
    "bart": ({"architectures": ["BartModel"], "model_type": "bart",
              "d_model": 24, "encoder_layers": 2, "decoder_layers": 2,
              "encoder_attention_heads": 3, "decoder_attention_heads": 2,
              "encoder_ffn_dim": 40, "decoder_ffn_dim": 36,
              "vocab_size": 53, "max_position_embeddings": 16,
              "activation_function": "gelu", "scale_embedding": False,
              "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
              "decoder_start_token_id": 2, "forced_eos_token_id": 2,
              "is_encoder_decoder": True, "tie_word_embeddings": True},
             103),
    "t5": ({"architectures": ["T5Model"], "model_type": "t5", "d_model": 24,
            "d_kv": 6, "num_heads": 3, "num_layers": 2,
            "num_decoder_layers": 2, "d_ff": 40, "vocab_size": 53,
            "relative_attention_num_buckets": 8,
            "relative_attention_max_distance": 20,
            "feed_forward_proj": "relu", "layer_norm_epsilon": 1e-6,
            "is_encoder_decoder": True, "pad_token_id": 0,
            "eos_token_id": 1, "decoder_start_token_id": 0,
            "tie_word_embeddings": True}, 104),
    "vit": ({"architectures": ["ViTModel"], "model_type": "vit",
             "hidden_size": 24, "num_hidden_layers": 2,
             "num_attention_heads": 3, "intermediate_size": 40,
             "hidden_act": "gelu", "layer_norm_eps": 1e-12,
             "image_size": [16, 24], "patch_size": 8, "num_channels": 3,
             "qkv_bias": True}, 105),
    "llama": ({"architectures": ["LlamaModel"], "model_type": "llama",
               "hidden_size": 32, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2,
               "intermediate_size": 40, "vocab_size": 53,
               "max_position_embeddings": 16, "rms_norm_eps": 1e-6,
               "rope_theta": 10000.0, "hidden_act": "silu",
               "attention_bias": False, "mlp_bias": False,
               "tie_word_embeddings": False, "bos_token_id": 1,
               "eos_token_id": 2, "pad_token_id": 0}, 106),
    "clip": ({"architectures": ["CLIPModel"], "model_type": "clip",
              "projection_dim": 16,
              "text_config": {"model_type": "clip_text_model",
                              "hidden_size": 24, "num_hidden_layers": 2,
                              "num_attention_heads": 3,
                              "intermediate_size": 40, "vocab_size": 53,
                              "max_position_embeddings": 16,
                              "hidden_act": "quick_gelu",
                              "layer_norm_eps": 1e-5, "bos_token_id": 1,
                              "eos_token_id": 2, "pad_token_id": 0},
              "vision_config": {"model_type": "clip_vision_model",
                                "hidden_size": 32, "num_hidden_layers": 2,
                                "num_attention_heads": 2,
                                "intermediate_size": 48, "image_size": 24,
                                "patch_size": 8, "num_channels": 3,
                                "hidden_act": "quick_gelu",
                                "layer_norm_eps": 1e-5}}, 107),
}


def kind(cfg):
    """"image", "encdec", "clip" (both) or "tokens": which inputs a model
    takes."""
    if cfg["model_type"] == "clip":
        return "clip"
    if "image_size" in cfg:
        return "image"
    return "encdec" if cfg.get("is_encoder_decoder") else "tokens"


def weights(tensors, seed):
    """{name: f32 array} for `tensors` [(name, shape), ...] from `seed`, in
    their order: norm gains (1-D weights of norms) 1 + 0.1 N(0, 1), token,
    position and class embeddings N(0, 1), other tensors of rank 2 or more
    1.5 / sqrt(fan-in) N(0, 1), the other vectors (biases) 0.1 N(0, 1)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in tensors:
        low = name.lower()
        if len(shape) == 1 and low.endswith(".weight") and (
                "norm" in low or ".ln_" in low or low.startswith("ln_")):
            x = 1 + 0.1 * rng.standard_normal(shape)
        elif any(t in low for t in ("embed", "wte", "wpe", "shared",
                                    "cls_token")):
            x = rng.standard_normal(shape)
        elif len(shape) >= 2:
            x = rng.standard_normal(shape) * 1.5 / np.sqrt(
                np.prod(shape[1:]))
        else:
            x = 0.1 * rng.standard_normal(shape)
        out[name] = x.astype(np.float32)
    return out


def inputs(cfg, seed):
    """The model's inputs from `seed`, {name: array} in tfc's input order:
    input_ids, attention_mask (the second row's last 2 tokens padding),
    decoder_input_ids for an encoder-decoder; pixel_values for an image;
    CLIP's pixel_values, then its text's input_ids and attention_mask."""
    rng = np.random.default_rng([seed, 1])
    image = cfg.get("vision_config", cfg)
    out = {}
    if kind(cfg) in ("image", "clip"):
        size = image["image_size"]
        h, w = size if isinstance(size, list) else (size, size)
        out["pixel_values"] = rng.uniform(
            -1, 1, (BATCH, image["num_channels"], h, w)).astype(np.float32)
        if kind(cfg) == "image":
            return out
    vocab = cfg.get("text_config", cfg)["vocab_size"]
    ids = rng.integers(3, vocab, (BATCH, SEQ)).astype(np.int64)
    mask = np.ones((BATCH, SEQ), dtype=np.int64)
    mask[1, SEQ - PADDING:] = 0
    out.update(input_ids=ids, attention_mask=mask)
    if kind(cfg) == "encdec":
        out["decoder_input_ids"] = rng.integers(
            3, vocab, (BATCH, DEC)).astype(np.int64)
    return out


def write_model(directory, cfg, tensors, seed):
    """config.json and model.safetensors (weights(tensors, seed)) in
    `directory`; returns the sha256 of model.safetensors."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    path = os.path.join(directory, "model.safetensors")
    safetensors_file.write_arrays(path, weights(tensors, seed),
                                  {"format": "pt"})
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()
