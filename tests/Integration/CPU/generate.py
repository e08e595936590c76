#!/usr/bin/env python3
"""Greedy generation with a LLaMA through two tfc builds, as a server runs
a decoder: a prefill build (--kv-cache --output=logits) for the prompt, and
one decode-step build for a fixed-size cache (--seq-len 1 --past-len C-1
--position-ids --present=new --output=logits) for every new token. The
caller keeps the cache: the prompt's keys and values go into its first
slots, each step's new token's keys and values into the slot of its
position; the mask hides the unused slots (random values here).

Every step's logits must match a float64 LLaMA on the tokens so far, and
each token tfc picks must be the reference's argmax wherever the
reference's two largest logits are more than 1e-3 apart.

usage: generate.py BINDIR WORKDIR [SEED]
"""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "pylib"))
from tfc_testing.arrays import random_tokens  # noqa: E402
from tfc_testing.harness import start  # noqa: E402

BATCH, PROMPT, NEW, CAPACITY = 2, 5, 8, 16


def main():
    h, rng, _ = start(sys.argv[1:])
    cfg = llama.CFG
    layers = cfg["num_hidden_layers"]
    model = h.path("llama_generate")
    w = llama.write_model(model, rng, cfg)
    head = w["lm_head.weight"].astype(np.float64)
    cap = CAPACITY - 1  # past slots of the step; the new token's comes last

    prefill, _ = h.build_hf("generate_prefill", model, BATCH, PROMPT, True,
                            ["--kv-cache", "--output=logits"])
    step, _ = h.build_hf("generate_step", model, BATCH, 1, True,
                         ["--past-len=%d" % cap, "--position-ids",
                          "--present=new", "--output=logits"])

    prompt, _ = random_tokens(rng, cfg["vocab_size"], BATCH, PROMPT)
    out = h.run_hf(prefill, model, [prompt, np.ones_like(prompt)],
                   1 + 2 * layers)
    logits = [out[0]]
    # The cache: random values in the unused slots, hidden by the mask.
    cache = [rng.standard_normal(o.shape[:2] + (cap,) + o.shape[3:])
             .astype(np.float32) for o in out[1:]]
    for c, o in zip(cache, out[1:]):
        c[:, :, :PROMPT] = o
    tokens = prompt
    for t in range(PROMPT, PROMPT + NEW):
        next_token = logits[-1][:, -1].argmax(-1)[:, None].astype(np.int64)
        tokens = np.concatenate([tokens, next_token], 1)
        mask = np.zeros((BATCH, cap + 1), dtype=np.int64)
        mask[:, :t] = 1
        mask[:, cap] = 1
        positions = np.full((BATCH, 1), t, dtype=np.int64)
        out = h.run_hf(step, model, [next_token, mask, positions] + cache,
                       1 + 2 * layers)
        h.expect("step %d returns the new token's keys and values only" % t,
                 all(o.shape[2] == 1 for o in out[1:]))
        for c, o in zip(cache, out[1:]):
            c[:, :, t] = o[:, :, 0]
        logits.append(out[0])

    # A position past the cache is refused before the step runs (not
    # clamped to the last slot): one line naming position_ids.
    bad = np.full((BATCH, 1), CAPACITY, dtype=np.int64)
    args, _ = h.run_args(step, model, [next_token, mask, bad] + cache,
                         1 + 2 * layers)
    proc = subprocess.run(args, capture_output=True, text=True)
    h.expect("position %d of a %d-slot cache is refused: %s" % (
        CAPACITY, CAPACITY, proc.stderr.strip()),
        proc.returncode == 1 and
        ("input 2 'position_ids' holds %d at [0, 0], outside [0, %d)" % (
            CAPACITY, CAPACITY)) in proc.stderr and
        len(proc.stderr.strip().splitlines()) == 1)

    # The reference on the tokens tfc chose (the last one's logits unused).
    ref = llama.reference(cfg, w, tokens, np.ones_like(tokens)) @ head.T
    h.expect_close("prompt logits", logits[0], ref[:, :PROMPT], 1e-4)
    for i, got in enumerate(logits[1:]):
        t = PROMPT + i
        h.expect_close("step %d logits (position %d of a %d-slot cache)" % (
            i, t, CAPACITY), got, ref[:, t:t + 1], 1e-4)
    for i in range(NEW):
        at = ref[:, PROMPT - 1 + i]
        top2 = np.sort(at, -1)[:, -2:]
        clear = top2[:, 1] - top2[:, 0] > 1e-3
        chosen = tokens[:, PROMPT + i]
        h.expect("token %d is the reference's greedy choice (%d of %d rows "
                 "without a near tie)" % (i, clear.sum(), BATCH),
                 np.all((chosen == at.argmax(-1)) | ~clear))
    print("generated", tokens[:, PROMPT:].tolist())
    h.finish()


if __name__ == "__main__":
    main()
