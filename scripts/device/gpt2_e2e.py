"""A GPT-2 decoder end to end in the device check.

Its weights do not travel: prepare compiles the fused build of a random
GPT-2 (tests/Integration/CPU/gpt2.py's model at device size: 2 blocks,
hidden 256, 4 heads of 64, batch 4, sequence 128, the last two rows right
padded) and carries the library and the config; the run writes the same
weights again from the seed, runs the library and compares its last hidden
state with the float64 numpy GPT-2 of that test (checked against
transformers' GPT2Model): relative error under 1e-4, as the CPU test
requires.
"""

import json
import os
import sys

import numpy as np

# Appended, not prepended: that directory also holds a minilm.py.
sys.path.append(os.path.join(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))), "tests", "Integration",
    "CPU"))
import gpt2 as model  # noqa: E402
import minilm  # noqa: E402  (this directory's, first on the path)

CFG = dict(model.CFG, n_embd=256, n_head=4, n_positions=160, vocab_size=512)
BATCH, SEQ, SEED = 4, 128, 2026
DIR = "gpt2"
LIB = os.path.join("models", "gpt2.fused.so")


def inputs():
    rng = np.random.default_rng(SEED + 1)
    ids = rng.integers(0, CFG["vocab_size"], (BATCH, SEQ)).astype(np.int64)
    mask = np.ones((BATCH, SEQ), dtype=np.int64)
    mask[2, SEQ - 30:] = 0
    mask[3, SEQ - 97:] = 0
    return ids, mask


def prepare(tfc_compile, out, target, gpu_flags, work):
    """Compiles the fused build into `out` and writes DIR/config.json;
    returns an error line or None."""
    src = os.path.join(work, "gpt2-model")
    model.write_model(src, np.random.default_rng(SEED), CFG)
    err = minilm.compile_hf(tfc_compile, src, BATCH, SEQ,
                            os.path.join(out, LIB), target, gpu_flags)
    if err:
        return err
    os.makedirs(os.path.join(out, DIR), exist_ok=True)
    with open(os.path.join(out, DIR, "config.json"), "w") as f:
        json.dump(CFG, f)
    return None


def check(base, run, work, checks, clock):
    if not os.path.exists(os.path.join(base, LIB)):
        print("info gpt2: not prepared", flush=True)
        return
    label = "gpt2 batch %d seq %d (2 blocks, padded rows) fused" % (BATCH,
                                                                   SEQ)
    src = os.path.join(work, "gpt2-model")
    weights = model.write_model(src, np.random.default_rng(SEED), CFG)
    ids, mask = inputs()
    paths = [os.path.join(work, "gpt2_ids.npy"),
             os.path.join(work, "gpt2_mask.npy")]
    np.save(paths[0], ids)
    np.save(paths[1], mask)
    out = os.path.join(work, "gpt2_out.npy")
    _, err = run(os.path.join(base, LIB), paths, out,
                 timeout=min(120, clock.left() - 5),
                 weights=os.path.join(src, "model.safetensors"))
    if err:
        checks.add(False, label, err)
        return
    got = np.load(out).astype(np.float64)
    ref = model.reference(CFG, weights, ids, mask)
    rel = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
    ok = bool(np.all(np.isfinite(got))) and rel < 1e-4
    checks.add(ok, label, "relative error %.1e (< 1e-4) against a float64 "
               "GPT-2 on the same weights" % rel)
