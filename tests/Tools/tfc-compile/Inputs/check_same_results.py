"""Checks the outputs of same-result-twice.mlir against float64 numpy:
a = b = exp(x), c = d = x, e = f = softmax(q k^T / 4) v.
  check_same_results.py DIR  (x, q, k, v .npy in; a ... f .npy out)"""
import os
import sys

import numpy as np

d = sys.argv[1]
load = lambda n: np.load(os.path.join(d, n + ".npy")).astype(np.float64)
x, q, k, v = (load(n) for n in "xqkv")
s = q @ k.transpose(0, 1, 3, 2) / 4.0
p = np.exp(s - s.max(-1, keepdims=True))
att = (p / p.sum(-1, keepdims=True)) @ v
refs = {"a": np.exp(x), "b": np.exp(x), "c": x, "d": x, "e": att, "f": att}
bad = 0
for name, ref in refs.items():
    err = np.max(np.abs(load(name) - ref)) / np.max(np.abs(ref))
    ok = err < 1e-5
    bad += not ok
    print("%s: %s relative error %.2g" % ("PASS" if ok else "FAIL", name, err))
print("%d failed" % bad)
sys.exit(1 if bad else 0)
