"""Checks the outputs of same-result-twice.mlir against float64 numpy:
a = b = exp(x), c = d = x, e = f = softmax(q k^T / 4) v.
  check_same_results.py DIR  (x, q, k, v .npy in; a ... f .npy out)"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "pylib"))
from tfc_testing.reference import attention  # noqa: E402

d = sys.argv[1]
load = lambda n: np.load(os.path.join(d, n + ".npy")).astype(np.float64)
x, q, k, v = (load(n) for n in "xqkv")
att = attention(q, k, v, scale=0.25)
refs = {"a": np.exp(x), "b": np.exp(x), "c": x, "d": x, "e": att, "f": att}
bad = 0
for name, ref in refs.items():
    err = np.max(np.abs(load(name) - ref)) / np.max(np.abs(ref))
    ok = err < 1e-5
    bad += not ok
    print("%s: %s relative error %.2g" % ("PASS" if ok else "FAIL", name, err))
print("%d failed" % bad)
sys.exit(1 if bad else 0)
