"""Compiles a Hugging Face model with its attention maps as outputs
(tfc-compile --attention-maps) and writes one PNG heat map per layer and
head of the probabilities it computes on one sequence.

usage: plot.py MODEL_DIR OUT_DIR (--text TEXT | --ids ID,ID,...)
               [--layers LAYERS] [--decoder-ids ID,ID,...] [--dtype f32]

--text needs the `tokenizers` package and the model's tokenizer.json;
--ids gives the token ids instead. LAYERS is --attention-maps's list
(default all; an encoder-decoder's as encoder.0, decoder.1-2, cross.all),
and an encoder-decoder needs --decoder-ids. Each map is written as
OUT_DIR/NAME.head<H>.png (NAME: attentions.L, encoder_attentions.L, ...),
queries down, keys across. The model runs in this process through the tfc
Python package (python/, used from this tree when it is not installed).
"""

import argparse
import json
import os
import sys

import numpy as np

try:
    import tfc
except ImportError:  # not installed: the package of this source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "..", "python"))
    import tfc  # noqa: E402


def fail(message):
    sys.exit("plot.py: " + message)


def ids_of(text):
    return [int(t) for t in text.split(",")]


def tokens(args):
    """The token ids and their labels (the tokenizer's pieces, or the ids)."""
    if args.ids:
        ids = ids_of(args.ids)
        return ids, [str(i) for i in ids]
    try:
        from tokenizers import Tokenizer
    except ImportError:
        fail("--text needs the tokenizers package (pip install tokenizers); "
             "or give --ids")
    path = os.path.join(args.model, "tokenizer.json")
    if not os.path.exists(path):
        fail("--text: %s: no such file; give --ids" % path)
    tok = Tokenizer.from_file(path)
    tok.no_padding()  # one sequence: its own tokens, no padding to a length
    enc = tok.encode(args.text)
    return enc.ids, enc.tokens


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("out")
    p.add_argument("--text")
    p.add_argument("--ids")
    p.add_argument("--decoder-ids")
    p.add_argument("--layers", default="all")
    p.add_argument("--dtype", default="f32")
    args = p.parse_args()
    if (args.text is None) == (args.ids is None):
        fail("give one of --text and --ids")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        fail("matplotlib is not installed (pip install matplotlib)")
    with open(os.path.join(args.model, "config.json")) as f:
        encoder_decoder = json.load(f).get("is_encoder_decoder", False)
    if encoder_decoder and not args.decoder_ids:
        fail("an encoder-decoder needs --decoder-ids")

    ids, labels = tokens(args)
    inputs = {"input_ids": np.array([ids], dtype=np.int64),
              "attention_mask": np.ones((1, len(ids)), dtype=np.int64)}
    flags = ["--attention-maps=" + args.layers]
    dec_labels = []
    if encoder_decoder:
        dec = ids_of(args.decoder_ids)
        dec_labels = [str(i) for i in dec]
        inputs["decoder_input_ids"] = np.array([dec], dtype=np.int64)
        flags.append("--decoder-seq-len=%d" % len(dec))
    try:
        model = tfc.compile(args.model, batch=1, seq_len=len(ids),
                            dtype=args.dtype, extra_args=flags)
    except tfc.Error as e:
        fail(str(e))
    with model:
        outputs = model.run(**inputs)
        names = [o.name for o in model.outputs]
    os.makedirs(args.out, exist_ok=True)
    written = 0
    for name, probs in zip(names, outputs):
        if "attentions." not in name:
            continue
        if probs.dtype == np.uint16:  # bf16's bits
            probs = (probs.astype(np.uint32) << 16).view(np.float32)
        probs = probs.astype(np.float32)
        queries = dec_labels if name.startswith(("decoder", "cross")) \
            else labels
        keys = dec_labels if name.startswith("decoder") else labels
        for h in range(probs.shape[1]):
            fig, ax = plt.subplots(figsize=(1 + 0.4 * len(keys),
                                            1 + 0.4 * len(queries)))
            im = ax.imshow(probs[0, h], vmin=0, vmax=1, cmap="viridis")
            ax.set_xticks(range(len(keys)), keys, rotation=90)
            ax.set_yticks(range(len(queries)), queries)
            ax.set_xlabel("key")
            ax.set_ylabel("query")
            ax.set_title("%s, head %d" % (name, h))
            fig.colorbar(im, ax=ax)
            fig.tight_layout()
            fig.savefig(os.path.join(args.out, "%s.head%d.png" % (name, h)))
            plt.close(fig)
            written += 1
    print("wrote %d heat maps to %s" % (written, args.out))


if __name__ == "__main__":
    main()
