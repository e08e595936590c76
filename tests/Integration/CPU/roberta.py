"""RoBERTa and XLM-RoBERTa encoders imported from config.json +
model.safetensors (tfc-compile --hf; random weights written by
tests/Importer/Inputs/make_fake_bert.py), fused and unfused, in f32 and f16,
against the float64 model of tests/pylib/tfc_testing/reference.py (BertModel
with RoBERTa's position ids, mean pooling, normalisation): a padded batch
row, a padding id inside a row (its position is pad_token_id and the next
tokens' count on without it) and the longest sequence the position table
allows.

usage: roberta.py BINDIR WORKDIR [SEED] [--target=cpu|nvptx]
                  [--gpu-binary=cubin|ptx]
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "pylib"))
from tfc_testing import reference, safetensors_file  # noqa: E402
from tfc_testing.arrays import random_tokens, rounded_weights  # noqa: E402
from tfc_testing.harness import start  # noqa: E402

INPUTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                      "Importer", "Inputs")

BATCH, SEQ, VOCAB = 3, 11, 50


def main():
    h, rng, _ = start(sys.argv[1:])
    for family in ("roberta", "xlm-roberta"):
        model = h.path(family)
        # Positions run from pad_token_id + 1 to pad_token_id + SEQ: the
        # table holds exactly those.
        subprocess.run([sys.executable,
                        os.path.join(INPUTS, "make_fake_bert.py"), model,
                        "--family", family, "--layers", "2", "--hidden", "32",
                        "--heads", "4", "--inter", "48", "--vocab",
                        str(VOCAB), "--max-pos", str(SEQ + 2), "--seed",
                        str(int(rng.integers(1 << 30)))], check=True)
        with open(os.path.join(model, "config.json")) as f:
            cfg = json.load(f)
        w = safetensors_file.read(model)
        ids, mask = random_tokens(rng, VOCAB, BATCH, SEQ, 4)
        ids[0, 3] = cfg["pad_token_id"]
        h.check_hidden_states(
            family, model, ids, mask,
            lambda dtype: reference.bert(
                cfg, rounded_weights(w, dtype), "", ids, mask),
            (("f32", 1e-5), ("f16", 10 * 2.0**-11)), "sentence embeddings")
    h.finish()


if __name__ == "__main__":
    main()
