"""Inputs and reference outputs of lengths_model, a model built for lengths
2, 4 and 8 (runtime/tests/fixtures/lengths_model.c).

  lengths.py make DIR L [SEED]  writes DIR/ids.npy (i64 [2, L], nonzero),
                                DIR/mask.npy (f32 [2, 3 + L]), DIR/scale.npy
                                (f32 [2]) and DIR/w.safetensors (w f32 [4]):
                                small random integers, so that every result
                                is exact in f32
  lengths.py check DIR L BUILT  compares DIR/y.npy, z.npy and info.npy with
                                the model computed here, as run at length L
                                by the variant of length BUILT; exits 1 on a
                                difference
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "pylib"))
from tfc_testing import safetensors_file  # noqa: E402


def make(d, length, seed):
    rng = np.random.default_rng(seed)
    np.save(os.path.join(d, "ids.npy"),
            rng.integers(1, 1000, size=(2, length), dtype=np.int64))
    np.save(os.path.join(d, "mask.npy"),
            rng.integers(-3, 4, size=(2, 3 + length)).astype(np.float32))
    np.save(os.path.join(d, "scale.npy"),
            rng.integers(1, 5, size=2).astype(np.float32))
    write_weight(os.path.join(d, "w.safetensors"), rng)


def write_weight(path, rng):
    """A safetensors file of the weight w, f32 [4], small integers."""
    safetensors_file.write_arrays(
        path, {"w": rng.integers(-4, 5, size=4).astype("<f4")})


def read_weight(path):
    return safetensors_file.read(path)["w"]


def check(d, length, built):
    load = lambda name: np.load(os.path.join(d, name + ".npy"))
    ids, mask, scale = load("ids"), load("mask"), load("scale")
    w = read_weight(os.path.join(d, "w.safetensors"))
    # The variant reads mask rows of 3 + BUILT entries, the caller's followed
    # by zeros: the same sums.
    z = mask.sum(axis=1, dtype=np.float32)
    y = (ids.astype(np.float32)[:, :, None] * w[None, None, :] *
         scale[:, None, None] + z[:, None, None])
    info = np.array([built, np.count_nonzero(ids)], np.int64)
    ok = True
    for name, want in (("y", y), ("z", z), ("info", info)):
        got = load(name)
        if got.dtype != want.dtype or got.shape != want.shape:
            print(f"{name}: {got.dtype} {list(got.shape)}, expected "
                  f"{want.dtype} {list(want.shape)}")
            ok = False
        elif not np.array_equal(got, want):
            where = np.argwhere(got != want)[0]
            print(f"{name}{list(where)}: {got[tuple(where)]}, expected "
                  f"{want[tuple(where)]}")
            ok = False
    if not ok:
        sys.exit(1)
    print(f"lengths_model: length {length} ran as {built}: y {list(y.shape)}, "
          f"z {list(z.shape)}, info {info.tolist()} as computed")


def main(argv):
    if argv[1] == "make":
        make(argv[2], int(argv[3]), int(argv[4]) if len(argv) > 4 else 0)
    elif argv[1] == "check":
        check(argv[2], int(argv[3]), int(argv[4]))
    else:
        sys.exit(f"lengths.py: unknown command {argv[1]}")


if __name__ == "__main__":
    main(sys.argv)
