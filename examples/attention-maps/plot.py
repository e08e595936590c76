"""Compiles a Hugging Face model with its attention maps as outputs
(tfc-compile --attention-maps) and writes one PNG heat map per layer and
head of the probabilities it computes on one sequence.

usage: plot.py MODEL_DIR OUT_DIR (--text TEXT | --ids ID,ID,... |
                                  --image PIXELS.npy)
               [--layers LAYERS] [--decoder-ids ID,ID,...] [--dtype f32]

--text needs the `tokenizers` package and the model's tokenizer.json;
--ids gives the token ids instead. LAYERS is --attention-maps's list
(default all; an encoder-decoder's as encoder.0, decoder.1-2, cross.all),
and an encoder-decoder needs --decoder-ids. Each map is written as
OUT_DIR/NAME.head<H>.png (NAME: attentions.L, encoder_attentions.L, ...),
queries down, keys across. --image takes a ViT's (or CLIP's vision
tower's) pixel values, [C, H, W] or [1, C, H, W] float32 as .npy: each map
is then drawn as what the class token attends to, one square per patch
laid out as the image's patch grid. The model runs in this process through
the tfc Python package (python/, used from this tree when it is not
installed).
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


def image_input(args, cfg):
    """--image's pixel values [1, 3, H, W], the tfc-compile flags of the
    vision model and its patch grid (rows, columns)."""
    vision = cfg.get("vision_config", cfg)

    def pair(v):
        return (v, v) if isinstance(v, int) else tuple(v)
    try:
        (h, w), (ph, pw) = pair(vision["image_size"]), pair(
            vision["patch_size"])
    except KeyError as e:
        fail("--image: %s/config.json has no %s: not an image model" % (
            args.model, e))
    try:
        px = np.load(args.image).astype(np.float32)
    except (OSError, ValueError) as e:
        fail("--image: %s: %s" % (args.image, e))
    c = vision.get("num_channels", 3)
    px = px[None] if px.ndim == 3 else px
    if px.shape != (1, c, h, w):
        fail("--image: %s: pixel values %s, not [%d, %d, %d] (the model's "
             "num_channels and image_size)" % (args.image, list(px.shape),
                                               c, h, w))
    flags = ["--part=vision"] if "vision_config" in cfg else []
    return px, flags, (h // ph, w // pw)


def draw_image_map(plt, probs, grid, title, path):
    """The class token's attention over the patches, as the patch grid."""
    fig, ax = plt.subplots(figsize=(max(4.5, 1.5 + 0.4 * grid[1]),
                                    max(3.5, 1 + 0.4 * grid[0])))
    im = ax.imshow(probs[0, 1:].reshape(grid), vmin=0, cmap="viridis")
    ax.set_xlabel("patch column")
    ax.set_ylabel("patch row")
    ax.set_title(title + ":\n[CLS] over the patches", fontsize=10)
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("out")
    p.add_argument("--text")
    p.add_argument("--ids")
    p.add_argument("--image")
    p.add_argument("--decoder-ids")
    p.add_argument("--layers", default="all")
    p.add_argument("--dtype", default="f32")
    args = p.parse_args()
    if sum(x is not None for x in (args.text, args.ids, args.image)) != 1:
        fail("give one of --text, --ids and --image")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        fail("matplotlib is not installed (pip install matplotlib)")
    with open(os.path.join(args.model, "config.json")) as f:
        cfg = json.load(f)
    encoder_decoder = cfg.get("is_encoder_decoder", False)
    if encoder_decoder and not args.decoder_ids:
        fail("an encoder-decoder needs --decoder-ids")

    flags = ["--attention-maps=" + args.layers]
    dec_labels, grid, seq_len = [], None, None
    if args.image:
        px, vision_flags, grid = image_input(args, cfg)
        inputs = {"pixel_values": px}
        flags += vision_flags
    else:
        ids, labels = tokens(args)
        inputs = {"input_ids": np.array([ids], dtype=np.int64),
                  "attention_mask": np.ones((1, len(ids)), dtype=np.int64)}
        seq_len = len(ids)
    if encoder_decoder:
        dec = ids_of(args.decoder_ids)
        dec_labels = [str(i) for i in dec]
        inputs["decoder_input_ids"] = np.array([dec], dtype=np.int64)
        flags.append("--decoder-seq-len=%d" % len(dec))
    try:
        model = tfc.compile(args.model, batch=1, seq_len=seq_len,
                            dtype=args.dtype, extra_args=flags)
    except tfc.Error as e:
        fail(str(e))
    with model:
        try:
            outputs = model.run(**inputs)
        except tfc.Error as e:
            fail(str(e))
        names = [o.name for o in model.outputs]
    os.makedirs(args.out, exist_ok=True)
    written = 0
    for name, probs in zip(names, outputs):
        if "attentions." not in name:
            continue
        if probs.dtype == np.uint16:  # bf16's bits
            probs = (probs.astype(np.uint32) << 16).view(np.float32)
        probs = probs.astype(np.float32)
        if grid:
            for h in range(probs.shape[1]):
                draw_image_map(plt, probs[0, h], grid,
                               "%s, head %d" % (name, h),
                               os.path.join(args.out,
                                            "%s.head%d.png" % (name, h)))
                written += 1
            continue
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
