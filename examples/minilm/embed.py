"""Embeds sentences with a compiled all-MiniLM-L6-v2 and prints their cosine
similarity matrix.

usage: embed.py MODEL_DIR MODEL_SO LIBTFCRT SEQ_LEN SENTENCE...

Token ids come from the model's own tokenizer (the `tokenizers` package);
the compiled model takes int64 [B, SEQ_LEN] ids and attention mask (padded
with 0) and returns L2-normalised [B, 384] embeddings. SEQ_LEN "upto=N"
pads the sentences only to the longest of them (at most N tokens), for a
model built for several lengths up to N (tfc-compile --seq-len 16,...,N).
The model runs in this process, through the tfc Python package (python/,
`pip install ./python`; used from this tree when it is not installed) on
LIBTFCRT (build/lib/libtfcrt.so).
"""

import os
import sys

import numpy as np
from tokenizers import Tokenizer

try:
    import tfc
except ImportError:  # not installed: the package of this source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "..", "python"))
    import tfc  # noqa: E402


def main():
    model_dir, model_so, libtfcrt, seq_len = sys.argv[1:5]
    longest = seq_len.startswith("upto=")
    seq_len = int(seq_len[len("upto="):] if longest else seq_len)
    sentences = sys.argv[5:]
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.enable_truncation(seq_len)
    tok.enable_padding(length=None if longest else seq_len)
    enc = tok.encode_batch(sentences)
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    with tfc.Model(model_so,
                   weights=os.path.join(model_dir, "model.safetensors"),
                   runtime=libtfcrt) as model:
        emb, = model.run(input_ids=ids, attention_mask=mask)
    sim = emb @ emb.T
    width = max(len(s) for s in sentences)
    width = min(width, 48)
    print("cosine similarity (tfc, fused all-MiniLM-L6-v2, %d tokens):" %
          ids.shape[1])
    for i, s in enumerate(sentences):
        label = (s[:width - 1] + "…") if len(s) > width else s
        print("  %-*s %s" % (width, label,
                              " ".join("%5.2f" % v for v in sim[i])))


if __name__ == "__main__":
    main()
