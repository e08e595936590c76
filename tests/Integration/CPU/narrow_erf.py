"""erf and GELU whose f32 results are rounded to f16 or bf16, which the CPU
pipeline computes with one rational approximation (tfc-math-approximation),
against float64 on fresh random inputs (seed printed), every special value
and the edges of the approximation's interval (|x| = 4):

- erf rounded to f16 and to bf16: every finite result within one unit in
  the last place of float64's erf correctly rounded to that type, and at
  least 99% of them equal to it (an approximation off by 1e-5 misses 4% of
  the f16 values); erf(+-0) = +-0, erf(+-inf) = erf(+-1e30) = +-1,
  erf(NaN) = NaN; erf(-x) = -erf(x).
- GELU, 0.5 x (1 + erf(x / sqrt(2))) as the importer writes it, rounded to
  bf16: within one bf16 unit of float64's GELU where x >= -3, and at least
  99% equal to it; below -3, where 1 + erf cancels in f32 whichever erf
  computes it, within one unit plus 2.5e-7 |x| (half of |x| times the f32
  erf's error, 6.1 units of f32 at 1, and the rounding of 1 + erf).

usage: narrow_erf.py BINDIR WORKDIR [SEED]
"""

import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "pylib"))
from tfc_testing.arrays import bf16_to_f32  # noqa: E402
from tfc_testing.harness import start  # noqa: E402

N = 100003
erf = np.vectorize(math.erf, otypes=[np.float64])
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 4.0, -4.0,
           np.nextafter(np.float32(4), np.float32(0)),
           np.nextafter(np.float32(4), np.float32(8)), 1.0, -1.0]


def erf_function(out):
    return """func.func @main(%%x: tensor<%dxf32>) -> tensor<%dx%s> {
  %%e = tosa.erf %%x : (tensor<%dxf32>) -> tensor<%dxf32>
  %%r = tosa.cast %%e : (tensor<%dxf32>) -> tensor<%dx%s>
  return %%r : tensor<%dx%s>
}
""" % (N, N, out, N, N, N, N, out, N, out)


def gelu_function():
    t = "tensor<%dxf32>" % N
    return """func.func @main(%%x: %(t)s) -> tensor<%(n)dxbf16> {
  %%c = "tosa.const"() <{values = dense<0.70710678118654757> : tensor<1xf32>}> : () -> tensor<1xf32>
  %%h = "tosa.const"() <{values = dense<0.5> : tensor<1xf32>}> : () -> tensor<1xf32>
  %%one = "tosa.const"() <{values = dense<1.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %%s = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %%a = tosa.mul %%x, %%c, %%s : (%(t)s, tensor<1xf32>, tensor<1xi8>) -> %(t)s
  %%e = tosa.erf %%a : (%(t)s) -> %(t)s
  %%p = tosa.add %%e, %%one : (%(t)s, tensor<1xf32>) -> %(t)s
  %%m = tosa.mul %%x, %%h, %%s : (%(t)s, tensor<1xf32>, tensor<1xi8>) -> %(t)s
  %%g = tosa.mul %%m, %%p, %%s : (%(t)s, %(t)s, tensor<1xi8>) -> %(t)s
  %%r = tosa.cast %%g : (%(t)s) -> tensor<%(n)dxbf16>
  return %%r : tensor<%(n)dxbf16>
}
""" % {"t": t, "n": N}


def to_bf16(x):
    """float64 values correctly rounded to bf16 (8 significant bits, to
    nearest even), as f32; normal numbers and zeros, infinities, NaN."""
    m, e = np.frexp(x)
    with np.errstate(invalid="ignore"):
        r = np.ldexp(np.round(np.ldexp(m, 8)), e - 8)
    return np.where(np.isfinite(x), r, x).astype(np.float32)


def ordinal(x, dtype):
    """Consecutive integers for consecutive values of `x` (f16, or bf16
    values held in f32): the distance between two values in units in the
    last place of the type."""
    if dtype == "f16":
        bits = x.astype(np.float16).view(np.int16).astype(np.int64)
    else:
        bits = x.astype(np.float32).view(np.int32).astype(np.int64) >> 16
    magnitude = bits & 0x7FFF
    return np.where(bits < 0, -magnitude, magnitude)


def rounded(ref, dtype):
    return ref.astype(np.float16) if dtype == "f16" else to_bf16(ref)


def result(h, lib, x, dtype):
    (out,) = h.run(lib, [x])
    return out if dtype == "f16" else bf16_to_f32(out)


def main():
    h, rng, _ = start(sys.argv[1:])
    count = N - len(SPECIAL)
    x = np.concatenate([
        np.array(SPECIAL, dtype=np.float32),
        (rng.standard_normal(count // 2) * 2.5).astype(np.float32),
        rng.uniform(-6, 6, count - count // 2).astype(np.float32)])
    ref_erf = erf(x.astype(np.float64))
    special = np.arange(N) < len(SPECIAL)
    for dtype in ("f16", "bf16"):
        lib = h.build("erf_" + dtype, erf_function(dtype), fused=True)
        got = result(h, lib, x, dtype)
        want = rounded(ref_erf, dtype)
        normal = ~special
        ulps = np.abs(ordinal(got[normal], dtype) -
                      ordinal(want[normal], dtype))
        h.expect("erf -> %s: %d values within one unit of float64's, "
                 "%.3f%% equal to it (at least 99%%)" %
                 (dtype, normal.sum(), 100 * np.mean(ulps == 0)),
                 np.all(np.isfinite(got[normal])) and ulps.max() <= 1 and
                 np.mean(ulps == 0) >= 0.99)
        s = got[:len(SPECIAL)].astype(np.float64)
        h.expect("erf -> %s: +-0 -> +-0, +-inf and +-1e30 -> +-1, NaN -> NaN"
                 % dtype,
                 s[0] == 0 and not np.signbit(s[0]) and s[1] == 0 and
                 np.signbit(s[1]) and s[2] == 1 and s[3] == -1 and
                 np.isnan(s[4]) and s[5] == 1 and s[6] == -1)
        h.expect("erf -> %s: +-4 and their neighbours, +-1 as float64's" %
                 dtype,
                 np.array_equal(s[7:], rounded(ref_erf[7:len(SPECIAL)],
                                               dtype).astype(np.float64)))
        neg = result(h, lib, -x, dtype)
        h.expect("erf -> %s is odd: erf(-x) = -erf(x)" % dtype,
                 np.array_equal(neg[normal], -got[normal]))

    lib = h.build("gelu_bf16", gelu_function(), fused=True)
    got = result(h, lib, x, "bf16")
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore"):  # -inf * 0 among the specials
        gelu = 0.5 * x64 * (1 + erf(x64 / math.sqrt(2)))
    want = to_bf16(gelu)
    finite = ~special
    upper = finite & (x >= -3)
    ulps = np.abs(ordinal(got[upper], "bf16") - ordinal(want[upper], "bf16"))
    h.expect("gelu -> bf16, x >= -3: %d values within one unit of float64's, "
             "%.3f%% equal (at least 99%%)" %
             (upper.sum(), 100 * np.mean(ulps == 0)),
             ulps.max() <= 1 and np.mean(ulps == 0) >= 0.99)
    lower = finite & (x < -3)
    unit = np.abs(np.spacing(want[lower])) * 2.0**16  # bf16's, as f32's
    err = np.abs(got[lower].astype(np.float64) - gelu[lower])
    allowed = unit + 2.5e-7 * np.abs(x64[lower])
    h.expect("gelu -> bf16, x < -3: %d values within one unit + 2.5e-7 |x| "
             "(worst %.2f of that)" % (lower.sum(), (err / allowed).max()),
             np.all(err <= allowed))
    h.finish()


if __name__ == "__main__":
    main()
