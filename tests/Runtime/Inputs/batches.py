"""Inputs and reference outputs of batches_model, a model built for batch
sizes 1 and 3 and lengths 2 and 5 (runtime/tests/fixtures/batches_model.c,
the layout with kv [2, 2B, L]).

  batches.py make DIR B L [SEED]  writes DIR/ids.npy (i64 [B, L], a third
                                  of them 0), DIR/mask.npy (f32 [B, 3 + L]),
                                  DIR/kv.npy (f32 [2, 2B, L]) and
                                  DIR/w.safetensors (w f32 [4]): small
                                  random integers, so that every result is
                                  exact in f32
  batches.py check DIR B L        compares DIR/y.npy, z.npy, kv2.npy and
                                  info.npy with the model computed here, as
                                  the runtime runs B sequences of L tokens:
                                  slices of 3, each as the smallest built
                                  batch and the shortest built length that
                                  hold it; exits 1 on a difference
"""
import os
import sys

import numpy as np

from lengths import read_weight, write_weight

LARGEST = 3


def built(n, sizes):
    return min(s for s in sizes if s >= n)


def make(d, batch, length, seed):
    rng = np.random.default_rng(seed)
    ids = np.maximum(rng.integers(-3, 10, size=(batch, length)), 0)
    np.save(os.path.join(d, "ids.npy"), ids.astype(np.int64))
    np.save(os.path.join(d, "mask.npy"),
            rng.integers(-3, 4, size=(batch, 3 + length)).astype(np.float32))
    np.save(os.path.join(d, "kv.npy"),
            rng.integers(-50, 50, size=(2, 2 * batch, length)).astype(
                np.float32))
    write_weight(os.path.join(d, "w.safetensors"), rng)


def check(d, batch, length, poisoned=True):
    """poisoned: the caller filled y with 0xFF bytes before the run (as
    tfc-run does), so the elements the model leaves are those; else they
    are not compared."""
    load = lambda name: np.load(os.path.join(d, name + ".npy"))
    ids, mask, kv = load("ids"), load("mask"), load("kv")
    w = read_weight(os.path.join(d, "w.safetensors"))
    # The variant reads mask rows of 3 + its length, the caller's followed
    # by zeros: the same sums.
    z = mask.sum(axis=1, dtype=np.float32)
    y = ids.astype(np.float32)[:, :, None] * w[None, None, :] + z[:, None,
                                                                  None]
    # Unwritten where the id is 0: tfc-run fills its outputs with 0xFF.
    y[ids == 0] = (np.frombuffer(b"\xff" * 4, np.float32)[0] if poisoned
                   else load("y")[ids == 0])
    info = np.zeros((batch, 3), np.int64)
    for b in range(batch):
        first = b // LARGEST * LARGEST
        info[b] = (built(min(LARGEST, batch - first), (1, 3)),
                   built(length, (2, 5)), np.count_nonzero(ids[b]))
    ok = True
    for name, want in (("y", y), ("z", z), ("kv2", kv + 1), ("info", info)):
        got = load(name)
        if got.dtype != want.dtype or got.shape != want.shape:
            print(f"{name}: {got.dtype} {list(got.shape)}, expected "
                  f"{want.dtype} {list(want.shape)}")
            ok = False
        elif got.tobytes() != want.tobytes():
            where = np.argwhere(got.view(np.uint8).reshape(got.shape + (-1,))
                                != want.view(np.uint8).reshape(
                                    want.shape + (-1,)))[0][:-1]
            print(f"{name}{list(where)}: {got[tuple(where)]}, expected "
                  f"{want[tuple(where)]}")
            ok = False
    if not ok:
        sys.exit(1)
    ran = sorted(set(map(tuple, info[:, :2].tolist())))
    print(f"batches_model: batch {batch}, length {length} ran on the "
          f"variants (batch, length) {', '.join('(%d, %d)' % r for r in ran)}"
          f": y {list(y.shape)}, z, kv2 and info as computed")


def main(argv):
    if argv[1] == "make":
        make(argv[2], int(argv[3]), int(argv[4]),
             int(argv[5]) if len(argv) > 5 else 0)
    elif argv[1] == "check":
        check(argv[2], int(argv[3]), int(argv[4]))
    else:
        sys.exit(f"batches.py: unknown command {argv[1]}")


if __name__ == "__main__":
    main(sys.argv)
