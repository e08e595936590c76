#!/usr/bin/env python3
"""Records transformers' attention probabilities (output_attentions=True,
eager attention) on the small random models of maps_fixture.py, for
attention-maps.py to compare tfc's --attention-maps with.

Run by hand, once, with a Python that has torch and transformers (CI has
neither; the two files it writes are committed):

  /work/venv-onnx/bin/python record.py WORKDIR

For each model it builds transformers' model of the config, saves it
(save_pretrained) to learn the tensors a checkpoint of it holds, writes
the model directory again with maps_fixture.weights drawn from the seed
under those names, loads that directory (from_pretrained: no tensor may be
missing or left over), runs it in f32 on maps_fixture.inputs and writes
models.json (configs, seeds, tensors, sha256, versions) and expected.npz
(the probabilities, f32) next to this file.
"""

import json
import os
import re
import sys

import numpy as np

import maps_fixture as fx


def probabilities(model, cfg, given):
    """{tfc's output name: f32 array} of transformers' attentions."""
    import torch
    args = {k: torch.from_numpy(v) for k, v in given.items()}
    with torch.no_grad():
        out = model(**args, output_attentions=True)
    kind = fx.kind(cfg)
    stacks = (("encoder", out.encoder_attentions),
              ("decoder", out.decoder_attentions),
              ("cross", out.cross_attentions)) if kind == "encdec" else \
        (("vision", out.vision_model_output.attentions),
         ("text", out.text_model_output.attentions)) if kind == "clip" else \
        (("", out.attentions),)
    return {("%s_" % s if s else "") + "attentions.%d" % l:
            p.float().numpy() for s, maps in stacks
            for l, p in enumerate(maps)}


def main():
    import torch
    import transformers
    from transformers import AutoConfig, AutoModel
    work = sys.argv[1]
    torch.manual_seed(0)
    models, expected = {}, {}
    for name, (cfg, seed) in fx.MODELS.items():
        config = AutoConfig.for_model(**cfg)
        config._attn_implementation = "eager"
        saved = os.path.join(work, name + ".saved")
        AutoModel.from_config(config, attn_implementation="eager") \
            .save_pretrained(saved, safe_serialization=True)
        header = fx.safetensors_file.read(saved)
        tensors = [(k, list(v.shape)) for k, v in header.items()]
        directory = os.path.join(work, name)
        digest = fx.write_model(directory, cfg, tensors, seed)
        model, info = AutoModel.from_pretrained(
            directory, attn_implementation="eager", output_loading_info=True,
            dtype=torch.float32)
        left = {k: v for k, v in info.items() if v}
        if left:
            sys.exit("record.py: %s: %s" % (name, left))
        model.eval()
        maps = probabilities(model, cfg, fx.inputs(cfg, seed))
        for k, p in maps.items():
            expected[name + "/" + k] = p.astype(np.float32)
        models[name] = {"config": cfg, "seed": seed, "tensors": tensors,
                        "sha256": digest}
        print(name, ", ".join("%s %s" % (k, list(p.shape))
                              for k, p in maps.items()))
    text = json.dumps({"versions": {"torch": torch.__version__,
                                    "transformers": transformers.__version__,
                                    "numpy": np.__version__},
                       "models": models}, indent=1)
    # A list of numbers, and a tensor [name, [shape]], on one line each.
    text = re.sub(r"\[\s+([\d,\s]+?)\s+\]", lambda m: "[%s]" % ", ".join(
        x.strip() for x in m.group(1).split(",")), text)
    text = re.sub(r'\[\s+("[^"]*"),\s+(\[[\d, ]*\])\s+\]', r"[\1, \2]", text)
    with open(fx.MODELS_JSON, "w") as f:
        f.write(text + "\n")
    np.savez_compressed(fx.EXPECTED_NPZ, **expected)


if __name__ == "__main__":
    main()
