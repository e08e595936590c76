"""Beam search over a model directory of make_model.py with tfc.Generator:
random source sentences of token ids in, the decoder's ids out, with the
time it took.

usage: translate.py MODEL_DIR [--sources N] [--src-len S]
                    [--max-new-tokens T] [--num-beams K] [--cache-dir DIR]

N sources of S random ids (default 2 of 32; every other one shorter,
padded at the end and masked), beam search with K beams (default: the
model's generation_config.json, 4 for make_model.py's) for up to T new
tokens (default 32). The first generate() compiles the builds it needs
(the encoder, the decoder's step; kept in --cache-dir when given), the
second one runs them only. With make_model.py's random weights the ids
mean nothing, and an untrained model repeats itself.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

try:
    import tfc
except ImportError:  # not installed: the package of this source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "..", "python"))
    import tfc  # noqa: E402


def fail(message):
    sys.exit("translate.py: " + message)


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fail("%s: %s" % (path, e))


def sources(cfg, n, length, rng):
    """ids [n, length] of ordinary tokens (no EOS, padding or start token)
    and their mask; every other row 3/4 as long, padded."""
    special = [cfg.get(k) for k in ("pad_token_id", "eos_token_id",
                                    "decoder_start_token_id")]
    if special[0] is None:
        fail("config.json has no pad_token_id")
    ordinary = np.setdiff1d(np.arange(cfg["vocab_size"]),
                            [t for t in special if t is not None])
    ids = rng.choice(ordinary, (n, length)).astype(np.int64)
    mask = np.ones_like(ids)
    for row in range(1, n, 2):
        ids[row, length * 3 // 4:] = special[0]
        mask[row, length * 3 // 4:] = 0
    return ids, mask


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("--sources", type=int, default=2)
    p.add_argument("--src-len", type=int, default=32)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--num-beams", type=int)
    p.add_argument("--cache-dir")
    args = p.parse_args()
    cfg = read_json(os.path.join(args.model, "config.json"))
    beams = args.num_beams
    if beams is None:
        path = os.path.join(args.model, "generation_config.json")
        beams = read_json(path).get("num_beams", 1) \
            if os.path.exists(path) else 1
    ids, mask = sources(cfg, args.sources, args.src_len,
                        np.random.default_rng(0))
    try:
        with tfc.Generator(args.model, max_length=args.max_new_tokens + 1,
                           batch=args.sources,
                           cache_dir=args.cache_dir) as gen:
            times = []
            for _ in range(2):
                start = time.perf_counter()
                out = gen.generate(ids, mask,
                                   max_new_tokens=args.max_new_tokens,
                                   num_beams=beams)
                times.append(time.perf_counter() - start)
    except tfc.Error as e:
        fail(str(e))
    for i in range(len(ids)):
        print("source %d (%d ids): %s" % (i, mask[i].sum(),
                                          " ".join(map(str, ids[i][
                                              mask[i] == 1]))))
        print("  -> %s" % " ".join(map(str, out[i])))
    print("beam search, %d beams, %d sources x %d ids, up to %d new ids: "
          "%.1f s the first call (it compiles the builds it needs), %.2f s "
          "the second" % (
              beams, len(ids), args.src_len, args.max_new_tokens, times[0],
              times[1]))


if __name__ == "__main__":
    main()
