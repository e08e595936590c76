"""all-MiniLM-L6-v2 compiled from its config.json and model.safetensors, fused
and unfused, against the PyTorch reference embeddings of tests/fixtures/minilm:
cosine similarity above 0.9999 per sentence and max abs error under 1e-4,
and a token id past the vocabulary refused;
computing in f16 and bf16 (--dtype), within 10 units of the type's roundoff.

usage: minilm.py BINDIR WORKDIR MODEL_DIR FIXTURES_DIR
"""

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "pylib"))
from tfc_testing.harness import Harness  # noqa: E402


def main():
    bindir, workdir, model, fixtures = sys.argv[1:5]
    h = Harness(bindir, workdir)
    ids = np.load(os.path.join(fixtures, "input_ids.npy"))
    mask = np.load(os.path.join(fixtures, "attention_mask.npy"))
    ref = np.load(os.path.join(fixtures, "embeddings.npy")).astype(np.float64)
    batch, seq = ids.shape
    for fused in (True, False):
        lib, summary = h.build_hf("minilm", model, batch, seq, fused)
        if fused:
            print(summary)
        emb = h.run_hf(lib, model, [ids, mask]).astype(np.float64)
        cos = (emb * ref).sum(1) / (np.linalg.norm(emb, axis=1) *
                                    np.linalg.norm(ref, axis=1))
        label = "minilm %s" % ("fused" if fused else "unfused")
        h.expect("%s: min cosine %.8f > 0.9999" % (label, cos.min()),
                 cos.min() > 0.9999)
        err = np.abs(emb - ref).max()
        h.expect("%s: max abs error %.2e < 1e-4" % (label, err), err < 1e-4)
        with open(os.path.join(model, "config.json")) as f:
            vocab = json.load(f)["vocab_size"]
        h.expect_token_refused(label, lib, model, ids, mask, vocab)
    # Computing in f16 and bf16 (--dtype; the model's f32 weights are cast
    # to the type once per run): the embeddings within 10 units of the
    # type's roundoff (2^-11, 2^-8) of PyTorch's f32 ones, norm-wise, every
    # sentence's direction kept (cosine above 0.999).
    for dtype, tol in (("f16", 10 * 2.0**-11), ("bf16", 10 * 2.0**-8)):
        lib, summary = h.build_hf("minilm_" + dtype, model, batch, seq, True,
                                  ["--dtype=" + dtype])
        print(summary)
        emb = h.run_hf(lib, model, [ids, mask]).astype(np.float64)
        cos = (emb * ref).sum(1) / (np.linalg.norm(emb, axis=1) *
                                    np.linalg.norm(ref, axis=1))
        h.expect("minilm %s: min cosine %.6f > 0.999" % (dtype, cos.min()),
                 cos.min() > 0.999)
        h.expect_close("minilm %s embeddings" % dtype, emb, ref, tol)
    h.finish()


if __name__ == "__main__":
    main()
