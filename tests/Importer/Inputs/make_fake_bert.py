#!/usr/bin/env python3
"""Writes a tiny random BERT model directory (stdlib only).

  make_fake_bert.py DIR [--layers 2] [--hidden 8] [--heads 2] [--inter 16]
      [--vocab 32] [--max-pos 16] [--prefix bert.] [--dtype F32|F16]
      [--set FIELD=JSON]... [--unset FIELD]... [--drop TENSOR]...
      [--shape TENSOR=d0,d1]... [--no-sentence-transformers] [--pooling cls]
      [--no-normalize] [--shards N] [--family bert|roberta|xlm-roberta]

--family roberta (or xlm-roberta) writes RobertaModel's config (pad_token_id
1, one token type, layer_norm_eps 1e-5). Writes config.json, model.safetensors (plus the unused tensors a real
checkpoint has: embeddings.position_ids, pooler.*), and unless
--no-sentence-transformers, modules.json and 1_Pooling/config.json.
"""
import argparse
import json
import os
import random
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "pylib"))
from tfc_testing import safetensors_file  # noqa: E402


def tensors(a):
    h, i = a.hidden, a.inter
    t = {
        "embeddings.word_embeddings.weight": [a.vocab, h],
        "embeddings.position_embeddings.weight": [a.max_pos, h],
        "embeddings.token_type_embeddings.weight": [
            1 if a.family != "bert" else 2, h],
        "embeddings.LayerNorm.weight": [h],
        "embeddings.LayerNorm.bias": [h],
    }
    for l in range(a.layers):
        p = "encoder.layer.%d." % l
        for n in ("query", "key", "value"):
            t[p + "attention.self.%s.weight" % n] = [h, h]
            t[p + "attention.self.%s.bias" % n] = [h]
        t[p + "attention.output.dense.weight"] = [h, h]
        t[p + "attention.output.dense.bias"] = [h]
        t[p + "attention.output.LayerNorm.weight"] = [h]
        t[p + "attention.output.LayerNorm.bias"] = [h]
        t[p + "intermediate.dense.weight"] = [i, h]
        t[p + "intermediate.dense.bias"] = [i]
        t[p + "output.dense.weight"] = [h, i]
        t[p + "output.dense.bias"] = [h]
        t[p + "output.LayerNorm.weight"] = [h]
        t[p + "output.LayerNorm.bias"] = [h]
    t["pooler.dense.weight"] = [h, h]
    t["pooler.dense.bias"] = [h]
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=8)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--inter", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=32)
    ap.add_argument("--max-pos", type=int, default=16)
    ap.add_argument("--prefix", default="")
    ap.add_argument("--dtype", default="F32", choices=["F32", "F16"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--unset", action="append", default=[])
    ap.add_argument("--drop", action="append", default=[])
    ap.add_argument("--shape", action="append", default=[])
    ap.add_argument("--no-sentence-transformers", action="store_true")
    ap.add_argument("--pooling", default="mean", choices=["mean", "cls"])
    ap.add_argument("--no-normalize", action="store_true")
    ap.add_argument("--family", default="bert",
                    choices=["bert", "roberta", "xlm-roberta"])
    ap.add_argument("--shards", type=int, default=1,
                    help="write model-0000i-of-0000n.safetensors + index")
    a = ap.parse_args()

    os.makedirs(a.dir, exist_ok=True)
    config = {
        "architectures": ["BertModel"], "model_type": "bert",
        "hidden_size": a.hidden, "num_hidden_layers": a.layers,
        "num_attention_heads": a.heads, "intermediate_size": a.inter,
        "vocab_size": a.vocab, "max_position_embeddings": a.max_pos,
        "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu",
        "position_embedding_type": "absolute", "pad_token_id": 0,
    }
    if a.family != "bert":
        config.update({
            "architectures": ["XLMRobertaModel" if a.family == "xlm-roberta"
                              else "RobertaModel"],
            "model_type": a.family, "pad_token_id": 1, "type_vocab_size": 1,
            "layer_norm_eps": 1e-5})
    for s in a.set:
        k, v = s.split("=", 1)
        config[k] = json.loads(v)
    for k in a.unset:
        config.pop(k, None)
    with open(os.path.join(a.dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)

    rng = random.Random(a.seed)
    shapes = tensors(a)
    for s in a.shape:
        k, v = s.split("=", 1)
        shapes[k] = [int(x) for x in v.split(",")]
    entries = []
    n_pos = a.max_pos
    entries.append(("embeddings.position_ids", "I64", [1, n_pos],
                    struct.pack("<%dq" % n_pos, *range(n_pos))))
    fmt = {"F32": "f", "F16": "e"}[a.dtype]
    for name, shape in shapes.items():
        if name in a.drop:
            continue
        n = 1
        for d in shape:
            n *= d
        if name.endswith("LayerNorm.weight"):
            vals = [1.0 + 0.1 * rng.uniform(-1, 1) for _ in range(n)]
        else:
            vals = [0.5 * rng.uniform(-1, 1) for _ in range(n)]
        entries.append((a.prefix + name, a.dtype, shape,
                        struct.pack("<%d%s" % (n, fmt), *vals)))
    if a.shards == 1:
        safetensors_file.write(os.path.join(a.dir, "model.safetensors"),
                               entries, {"format": "pt"})
    else:
        weight_map = {}
        for k in range(a.shards):
            fn = "model-%05d-of-%05d.safetensors" % (k + 1, a.shards)
            part = entries[k::a.shards]
            safetensors_file.write(os.path.join(a.dir, fn), part,
                                   {"format": "pt"})
            weight_map.update({e[0]: fn for e in part})
        with open(os.path.join(a.dir, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=1)

    if not a.no_sentence_transformers:
        modules = [{"idx": 0, "name": "0", "path": "",
                    "type": "sentence_transformers.models.Transformer"},
                   {"idx": 1, "name": "1", "path": "1_Pooling",
                    "type": "sentence_transformers.models.Pooling"}]
        if not a.no_normalize:
            modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                            "type": "sentence_transformers.models.Normalize"})
        with open(os.path.join(a.dir, "modules.json"), "w") as f:
            json.dump(modules, f, indent=2)
        os.makedirs(os.path.join(a.dir, "1_Pooling"), exist_ok=True)
        with open(os.path.join(a.dir, "1_Pooling", "config.json"), "w") as f:
            json.dump({"word_embedding_dimension": a.hidden,
                       "pooling_mode_cls_token": a.pooling == "cls",
                       "pooling_mode_mean_tokens": a.pooling == "mean",
                       "pooling_mode_max_tokens": False,
                       "pooling_mode_mean_sqrt_len_tokens": False}, f)


if __name__ == "__main__":
    main()
