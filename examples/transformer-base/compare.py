"""Checks a model directory of make_model.py against transformers:
MarianMTModel loads it with no missing or unexpected weight, tfc's logits
match PyTorch's, and tfc.Generator's beam search gives transformers'
generate() tokens. Needs torch and transformers (not tfc's tests).

usage: compare.py MODEL_DIR
"""

import json
import os
import sys

import numpy as np
import torch
import transformers

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))
import tfc  # noqa: E402
from translate import sources  # noqa: E402


def main():
    model_dir = sys.argv[1]
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    hf, info = transformers.MarianMTModel.from_pretrained(
        model_dir, output_loading_info=True)
    hf.eval()
    unloaded = {k: sorted(v) for k, v in info.items() if v}
    print("MarianMTModel loaded it: %s" % (unloaded or "every weight"))
    ids, mask = sources(cfg, 2, 32, np.random.default_rng(1))
    dec = np.random.default_rng(2).integers(0, cfg["vocab_size"], (2, 32))
    with torch.no_grad():
        ref = hf(input_ids=torch.tensor(ids),
                 attention_mask=torch.tensor(mask),
                 decoder_input_ids=torch.tensor(dec)).logits.numpy()
    with tfc.compile(model_dir, batch=2, seq_len=32,
                     extra_args=["--decoder-seq-len=32",
                                 "--output=logits"]) as m:
        got, = m.run(ids, mask, dec)
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    print("logits [2, 32, %d]: relative difference %.1e" % (
        got.shape[-1], err))
    with torch.no_grad():
        want = hf.generate(torch.tensor(ids),
                           attention_mask=torch.tensor(mask),
                           max_new_tokens=32).numpy()
    with tfc.Generator(model_dir, max_length=33) as gen:
        out = gen.generate(ids, mask, max_new_tokens=32)
    same = out.shape == want.shape and np.array_equal(out, want)
    print("beam search (generation_config.json: 4 beams): %s" % (
        "the same tokens as transformers'" if same else
        "DIFFERENT\n  tfc %s\n  transformers %s" % (out.tolist(),
                                                   want.tolist())))
    sys.exit(0 if same and err < 1e-4 and not unloaded else 1)


if __name__ == "__main__":
    main()
