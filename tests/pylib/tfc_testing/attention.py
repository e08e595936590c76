"""Attention in MLIR text: one transformer.attention (the numerics tests,
the device check, the instruction counts of bench/gpu), and the attention
graphs exporters write in TOSA 1.0 that the fusion must recognise.

Standard library only; the generated cases depend only on --seed and
--count:

  python3 -m tfc_testing.attention --seed 1 --count 40 --check > cases.mlir
  tfc-opt cases.mlir --transformer-fuse | FileCheck cases.mlir

Each case is one function with random shapes and a random choice of every
form the attention fusion must recognise (scale placement, K transpose or
pre-transposed K, 4-D through reshapes or 3-D, additive / causal / boolean
mask, GQA by tile or by reshape-tile-reshape, raw or fused softmax). With
--check the FileCheck lines the fused function must satisfy come with it:
one transformer.attention with the expected operand types, mask and
is_causal, and no tosa.matmul left.
"""

import argparse
import math
import random

from tfc_testing.mlir import function as mlir_function
from tfc_testing.mlir import tensor_type


def function(b, hq, hkv, sq, skv, d, dv=None, dtype="f32", mask=None,
             causal=False, scale=None, softcap=None, window=None):
    """func.func @main(%q [b,hq,sq,d], %k [b,hkv,skv,d], %v [b,hkv,skv,dv]
    [, %mask of the shape `mask`]) -> [b,hq,sq,dv]: one
    transformer.attention with the attributes given (None: left out)."""
    dv = dv or d
    shapes = [("q", (b, hq, sq, d)), ("k", (b, hkv, skv, d)),
              ("v", (b, hkv, skv, dv))]
    if mask is not None:
        shapes.append(("mask", mask))
    args = [(n, tensor_type(s, dtype)) for n, s in shapes]
    rt = tensor_type((b, hq, sq, dv), dtype)
    attrs = []
    if causal:
        attrs.append("is_causal")
    if scale is not None:
        attrs.append("scale = %r : f32" % scale)
    if softcap is not None:
        attrs.append("softcap = %r : f32" % softcap)
    if window is not None:
        attrs.append("window = %d : i64" % window)
    operands = "%q, %k, %v" + (" mask %mask" if mask is not None else "")
    return mlir_function(args, rt, [
        "%%o = transformer.attention %s %s: %s -> %s" % (
            operands, "{%s} " % ", ".join(attrs) if attrs else "",
            ", ".join(t for _, t in args), rt)])


# ------------------------------------------------------ the TOSA forms

def nested(values, shape):
    """Formats a flat list as a nested dense literal of `shape`."""
    if len(shape) == 1:
        return "[" + ", ".join(values) + "]"
    step = len(values) // shape[0]
    return "[" + ", ".join(nested(values[i * step:(i + 1) * step], shape[1:])
                           for i in range(shape[0])) + "]"


class Func:
    """Emits the body of one function with fresh SSA names."""

    def __init__(self, et):
        self.et = et
        self.lines = []
        self.n = 0
        self.types = {}
        self.zp = None
        self.shift = None

    def fresh(self, shape, et=None):
        self.n += 1
        name = "%%v%d" % self.n
        self.types[name] = (list(shape), et or self.et)
        return name

    def ty(self, v):
        shape, et = self.types[v]
        return tensor_type(shape, et)

    def shape(self, v):
        return self.types[v][0]

    def emit(self, text):
        self.lines.append("  " + text)

    def const(self, shape, value, et=None):
        et = et or self.et
        r = self.fresh(shape, et)
        self.emit('%s = "tosa.const"() <{values = dense<%s> : %s}> : () -> %s'
                  % (r, value, tensor_type(shape, et),
                     tensor_type(shape, et)))
        return r

    def splat(self, value, rank):
        if value == -math.inf:
            text = "0xFF800000" if self.et == "f32" else "0xFC00"
        else:
            text = repr(float(value))
            if "e" in text and "." not in text.split("e")[0]:
                text = text.replace("e", ".0e")  # MLIR needs 1.0e-05
        return self.const([1] * rank, text)

    def shape_value(self, shape):
        r = "%%s%d" % (self.n + 1)
        self.n += 1
        self.emit("%s = tosa.const_shape {values = dense<[%s]> : tensor<%dxindex>}"
                  " : () -> !tosa.shape<%d>"
                  % (r, ", ".join(map(str, shape)), len(shape), len(shape)))
        return r

    def reshape(self, x, shape):
        s = self.shape_value(shape)
        r = self.fresh(shape)
        self.emit("%s = tosa.reshape %s, %s : (%s, !tosa.shape<%d>) -> %s"
                  % (r, x, s, self.ty(x), len(shape), self.ty(r)))
        return r

    def transpose(self, x, perms):
        shape = [self.shape(x)[p] for p in perms]
        r = self.fresh(shape)
        self.emit("%s = tosa.transpose %s {perms = array<i32: %s>} : (%s) -> %s"
                  % (r, x, ", ".join(map(str, perms)), self.ty(x), self.ty(r)))
        return r

    def tile(self, x, multiples):
        s = self.shape_value(multiples)
        shape = [d * m for d, m in zip(self.shape(x), multiples)]
        r = self.fresh(shape)
        self.emit("%s = tosa.tile %s, %s : (%s, !tosa.shape<%d>) -> %s"
                  % (r, x, s, self.ty(x), len(multiples), self.ty(r)))
        return r

    def matmul(self, a, b):
        if self.zp is None:
            self.zp = self.const([1], "0.0")
        sa, sb = self.shape(a), self.shape(b)
        r = self.fresh([sa[0], sa[1], sb[2]])
        self.emit("%s = tosa.matmul %s, %s, %s, %s : (%s, %s, %s, %s) -> %s"
                  % (r, a, b, self.zp, self.zp, self.ty(a), self.ty(b),
                     self.ty(self.zp), self.ty(self.zp), self.ty(r)))
        return r

    def binary(self, op, a, b):
        shape = [max(x, y) for x, y in zip(self.shape(a), self.shape(b))]
        r = self.fresh(shape)
        self.emit("%s = tosa.%s %s, %s : (%s, %s) -> %s"
                  % (r, op, a, b, self.ty(a), self.ty(b), self.ty(r)))
        return r

    def mul(self, a, b):
        if self.shift is None:
            self.shift = self.const([1], "0", "i8")
        shape = [max(x, y) for x, y in zip(self.shape(a), self.shape(b))]
        r = self.fresh(shape)
        self.emit("%s = tosa.mul %s, %s, %s : (%s, %s, tensor<1xi8>) -> %s"
                  % (r, a, b, self.shift, self.ty(a), self.ty(b), self.ty(r)))
        return r

    def unary(self, op, x):
        r = self.fresh(self.shape(x))
        self.emit("%s = tosa.%s %s : (%s) -> %s"
                  % (r, op, x, self.ty(x), self.ty(r)))
        return r

    def reduce(self, op, x, axis):
        shape = list(self.shape(x))
        shape[axis] = 1
        r = self.fresh(shape)
        self.emit("%s = tosa.%s %s {axis = %d : i32} : (%s) -> %s"
                  % (r, op, x, axis, self.ty(x), self.ty(r)))
        return r

    def select(self, cond, a, b):
        r = self.fresh([max(x, y) for x, y in zip(self.shape(a),
                                                  self.shape(b))])
        self.emit("%s = tosa.select %s, %s, %s : (%s, %s, %s) -> %s"
                  % (r, cond, a, b, self.ty(cond), self.ty(a), self.ty(b),
                     self.ty(r)))
        return r

    def softmax(self, x, form):
        axis = len(self.shape(x)) - 1
        if form == "fused":
            r = self.fresh(self.shape(x))
            self.emit("%s = transformer.softmax %s {dimension = %d : i64} : %s -> %s"
                      % (r, x, axis, self.ty(x), self.ty(r)))
            return r
        if form == "raw":
            x = self.binary("sub", x, self.reduce("reduce_max", x, axis))
        e = self.unary("exp", x)
        inv = self.unary("reciprocal", self.reduce("reduce_sum", e, axis))
        return self.mul(e, inv)


def bool_const(f, shape, pred, invert=False):
    """A constant i1 tensor of pred(i, j) (negated with `invert`); also says
    whether pred is exactly the causal pattern."""
    sq, skv = shape[-2], shape[-1]
    values = []
    for _ in range(math.prod(shape[:-2])):
        for i in range(sq):
            for j in range(skv):
                values.append("true" if pred(i, j) else "false")
    causal = sq <= skv and all(
        (values[i * skv + j] == "true") == (j <= i + (skv - sq))
        for i in range(sq) for j in range(skv))
    if invert:
        values = ["false" if v == "true" else "true" for v in values]
    return f.const(shape, nested(values, shape), "i1"), causal


# Sizes for --small: cases the evaluator (tosa_eval.py) runs in
# milliseconds.
SMALL = {"b": [1, 2], "hkv": [1, 2], "groups": [1, 2], "sq": [1, 2, 3, 5],
         "d": [4, 8], "dv": [4, 8]}


def make_case(rng, index, name=None, small=False, **fixed):
    """One case; `fixed` pins any random choice by its name."""
    def pick(key, options):
        if key in fixed:
            return fixed[key]
        if small and key in SMALL:
            options = [o for o in options if o in SMALL[key]] or SMALL[key]
        return rng.choice(options)

    et = pick("et", ["f32", "f32", "f32", "f16"])
    layout = pick("layout", ["4d", "4d", "3d"])
    b = pick("b", [1, 1, 2, 3])
    hkv = pick("hkv", [1, 2, 3])
    groups = pick("groups", [1, 1, 2, 4] if layout == "4d" else [1])
    hq = hkv * groups if layout == "4d" else 1
    gqa = pick("gqa", ["tile", "expand"] if groups > 1 else ["none"])
    if layout == "3d":
        hkv = 1
    sq = pick("sq", [1, 3, 7, 16, 33])
    skv = pick("skv", [sq, sq, sq + 2] if small else [sq, sq, sq + 5, 40])
    d = pick("d", [8, 16, 24, 80])
    dv = pick("dv", [d, d, 8, 40])
    ktrans = pick("ktrans", ["transpose", "transpose", "pre"])
    scale = pick("scale", ["none", "scores_mul", "scores_recip", "q", "qk_sqrt"])
    mask = pick("mask", ["none", "add", "add", "causal", "bool",
                         "causal_add"])
    if mask == "causal_add" and sq > skv:
        mask = "add"
    if mask == "causal" and sq > skv:
        mask = "add"
    softmax = pick("softmax", ["raw", "raw", "raw_nomax", "fused"])

    f = Func(et)
    n = b * hq
    if layout == "4d":
        q = f.fresh([b, hq, sq, d])
        k = f.fresh([b, hkv, d, skv] if ktrans == "pre" else [b, hkv, skv, d])
        v = f.fresh([b, hkv, skv, dv])
    else:
        q = f.fresh([n, sq, d])
        k = f.fresh([n, d, skv] if ktrans == "pre" else [n, skv, d])
        v = f.fresh([n, skv, dv])
    args = [q, k, v]
    rank = 4 if layout == "4d" else 3

    mask_arg = None
    if mask in ("add", "causal_add"):
        full = [b, hq, sq, skv] if rank == 4 else [n, sq, skv]
        mshape = fixed.get("mshape") or [dim if rng.random() < 0.5 else 1
                                         for dim in full]
        mask_arg = f.fresh(mshape)
        args.append(mask_arg)

    factor = 1.0 / math.sqrt(d) if scale != "none" else 1.0
    if scale == "q":
        q = f.mul(q, f.splat(factor, rank))
    elif scale == "qk_sqrt":
        root = f.splat(math.sqrt(factor), rank)
        q = f.mul(q, root)
        k = f.mul(k, root)

    def repeat(x):
        if gqa == "tile":
            return f.tile(x, [1, groups, 1, 1])
        if gqa == "expand":
            s = f.shape(x)
            x5 = f.reshape(x, [s[0], s[1], 1, s[2], s[3]])
            t = f.tile(x5, [1, 1, groups, 1, 1])
            return f.reshape(t, [s[0], s[1] * groups, s[2], s[3]])
        return x

    k = repeat(k)
    v = repeat(v)
    if layout == "4d":
        q3 = f.reshape(q, [n, sq, d])
        if ktrans == "pre":
            kt3 = f.reshape(k, [n, d, skv])
        elif pick("kt", ["t4", "t3"]) == "t4":
            kt3 = f.reshape(f.transpose(k, [0, 1, 3, 2]), [n, d, skv])
        else:
            kt3 = f.transpose(f.reshape(k, [n, skv, d]), [0, 2, 1])
        v3 = f.reshape(v, [n, skv, dv])
    else:
        q3, v3 = q, v
        kt3 = k if ktrans == "pre" else f.transpose(k, [0, 2, 1])

    s = f.matmul(q3, kt3)
    if layout == "4d":
        s = f.reshape(s, [b, hq, sq, skv])
    if scale == "scores_mul":
        s = f.mul(s, f.splat(factor, rank))
    elif scale == "scores_recip":
        s = f.mul(s, f.unary("reciprocal", f.splat(math.sqrt(d), rank)))
    def add_mask(s):
        if pick("mask_first", [0, 1]):
            return f.binary("add", mask_arg, s)
        return f.binary("add", s, mask_arg)

    def select_mask(s):
        nonlocal mask
        cshape = [1] * (rank - 2) + [sq, skv]
        # masked_fill(hidden, fill) is select(not visible, fill, scores).
        inverted = pick("inverted", [0, 0, 1])
        if mask == "bool":
            # Every row keeps key 0 visible, so no row is fully masked.
            cond, causal = bool_const(
                f, cshape, lambda i, j: j == 0 or rng.random() < 0.6, inverted)
            if causal:  # A random pattern can be the causal one.
                mask = "causal"
        else:
            cond, _ = bool_const(f, cshape, lambda i, j: j <= i + (skv - sq),
                                 inverted)
        big = -1.0e9 if et == "f32" else -65504.0
        fill = pick("fill", ["-inf", "big"])
        # A causal select next to an additive mask fuses only with -inf
        # (a finite fill and a mask hiding every visible key of a row
        # would not be the op).
        fill = -math.inf if mask == "causal_add" or fill == "-inf" else big
        neg = f.splat(fill, rank)
        if inverted:
            return f.select(cond, neg, s)
        return f.select(cond, s, neg)

    if mask == "add":
        s = add_mask(s)
    elif mask in ("causal", "bool"):
        s = select_mask(s)
    elif mask == "causal_add":
        if pick("causal_first", [0, 1]):
            s = add_mask(select_mask(s))
        else:
            s = select_mask(add_mask(s))
    p = f.softmax(s, softmax)
    if layout == "4d":
        p = f.reshape(p, [n, sq, skv])
    o = f.matmul(p, v3)
    if layout == "4d":
        o = f.reshape(o, [b, hq, sq, dv])

    name = name or "case_%d" % index
    sig = ", ".join("%s: %s" % (a, f.ty(a)) for a in args)
    text = ["func.func @%s(%s) -> %s {" % (name, sig, f.ty(o))]
    text += f.lines
    text.append("  return %s : %s" % (o, f.ty(o)))
    text.append("}")

    def t4(shape):
        return tensor_type(shape, et)
    checks = ["// CHECK-LABEL: func.func @%s(" % name,
              "// CHECK-NOT: tosa.matmul",
              "// CHECK: transformer.attention"]
    if mask in ("add", "bool", "causal_add"):
        checks.append("// CHECK-SAME: mask")
    if mask in ("causal", "causal_add"):
        checks.append("// CHECK-SAME: is_causal")
    checks.append("// CHECK-SAME: : %s, %s, %s" % (
        t4([b, hq, sq, d]), t4([b, hkv, skv, d]), t4([b, hkv, skv, dv])))
    checks.append("// CHECK-SAME: -> %s" % t4([b, hq, sq, dv]))
    checks.append("// CHECK-NOT: tosa.matmul")
    summary = ("// %s: layout=%s B=%d Hq=%d Hkv=%d Sq=%d Skv=%d D=%d Dv=%d "
               "k=%s gqa=%s scale=%s mask=%s softmax=%s %s"
               % (name, layout, b, hq, hkv, sq, skv, d, dv, ktrans, gqa,
                  scale, mask, softmax, et))
    return summary, checks, text


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--small", action="store_true",
                        help="tiny shapes, for the numeric comparison")
    parser.add_argument("--check", action="store_true",
                        help="also write FileCheck lines for the fused IR")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    out = []
    for i in range(args.count):
        summary, checks, text = make_case(rng, i, small=args.small)
        out.append(summary)
        if args.check:
            out += checks
        out += text
        out.append("")
    print("\n".join(out))


if __name__ == "__main__":
    main()
