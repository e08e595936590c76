#!/usr/bin/env python3
"""Evaluates small TOSA / transformer functions in pure Python (no numpy).

Reads two modules in MLIR generic form (`tfc-opt --mlir-print-op-generic`),
runs every function of the first and the function of the same name in the
second on the same seeded random inputs, and reports the largest relative
difference. Used to check that a fusion preserved the graph's values:

  tfc-opt cases.mlir --mlir-print-op-generic > a.mlir
  tfc-opt cases.mlir --transformer-fuse --mlir-print-op-generic > b.mlir
  python3 tosa_eval.py a.mlir b.mlir

Only the ops the fusion tests use are implemented; the transformer ops are
evaluated by their definition (docs of TransformerOps.td). Exits 1 when a
function differs by more than --tol.
"""

import argparse
import math
import random
import re
import struct
import sys


def prod(xs):
    r = 1
    for x in xs:
        r *= x
    return r


def strides(shape):
    s = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        s[i] = s[i + 1] * shape[i + 1]
    return s


def unravel(i, shape):
    idx = []
    for d in reversed(shape):
        idx.append(i % d)
        i //= d
    return idx[::-1]


class T:
    def __init__(self, shape, data):
        self.shape = list(shape)
        self.data = data
        assert len(data) == prod(shape), (shape, len(data))

    def at(self, idx):
        off = 0
        for i, s, d in zip(idx, strides(self.shape), self.shape):
            off += (0 if d == 1 else i) * s
        return self.data[off]


def parse_type(text):
    m = re.match(r"tensor<((?:\d+x)*)(\w+)>", text.strip())
    dims = [int(d) for d in m.group(1).split("x") if d]
    return dims, m.group(2)


def parse_dense(text, shape, et):
    text = text.strip()
    n = prod(shape)
    if text.startswith("0x"):
        # A single element written as its bit pattern: 0xFF800000 is -inf.
        bits = int(text, 16)
        fmt = {"f32": ("I", "f"), "f16": ("H", "e")}.get(et)
        if fmt is None:
            return [bits] * n
        value = struct.unpack(">" + fmt[1], struct.pack(">" + fmt[0], bits))[0]
        return [value] * n
    if text.startswith('"0x'):
        raw = bytes.fromhex(text.strip('"')[2:])
        if et == "i1":
            bits = [bool(byte >> b & 1) for byte in raw for b in range(8)]
            return bits[:n] if len(raw) * 8 >= n and n > 1 else [bits[0]] * n
        fmt = {"f32": "f", "f16": "e", "i8": "b", "i1": "?", "i32": "i"}[et]
        size = struct.calcsize(fmt)
        vals = [struct.unpack("<" + fmt, raw[i:i + size])[0]
                for i in range(0, len(raw), size)]
        if et == "i1" and len(vals) != n:
            vals = [bool(b) for b in vals]
        return vals * n if len(vals) == 1 else vals
    toks = re.findall(r"0x[0-9A-Fa-f]+|true|false|[-+0-9.eEinfa]+", text)
    vals = []
    for t in toks:
        if t.startswith("0x"):
            vals.append(parse_dense(t, [1], et)[0])
        elif t == "true":
            vals.append(True)
        elif t == "false":
            vals.append(False)
        else:
            vals.append(float(t))
    return vals * n if len(vals) == 1 else vals


OP_RE = re.compile(
    r'^\s*(?:(%[\w#]+)(?::\d+)? = )?"([\w.]+)"\((.*?)\)'
    r'(?: <\{(.*)\}>)? : \((.*)\) -> (.*)$')


def parse_module(path):
    funcs = {}
    cur = None
    for line in open(path):
        m = re.search(r'sym_name = "(\w+)"', line)
        if m and '"func.func"' in line:
            cur = {"name": m.group(1), "args": [], "ops": []}
            funcs[cur["name"]] = cur
            continue
        m = re.match(r"\s*\^bb0\((.*)\):", line)
        if m and cur is not None and not cur["args"]:
            for a in re.finditer(r"(%\w+): (tensor<[^>]*>)", m.group(1)):
                cur["args"].append((a.group(1), parse_type(a.group(2))))
            continue
        m = OP_RE.match(line)
        if m and cur is not None:
            res, name, operands, attrs, _, rtype = m.groups()
            cur["ops"].append({
                "res": res, "name": name,
                "operands": [o.strip() for o in operands.split(",") if o.strip()],
                "attrs": attrs or "", "rtype": rtype.strip()})
    return funcs


def attr_int(attrs, key):
    return int(re.search(key + r" = (-?\d+)", attrs).group(1))


def attr_ints(attrs, key):
    m = re.search(key + r" = (?:array<i32: |dense<\[?)([-\d, ]*)", attrs)
    return [int(x) for x in m.group(1).split(",") if x.strip()]


def attr_float(attrs, key):
    m = re.search(key + r" = ([-+0-9.eEinf]+|0x[0-9A-F]+) : f32", attrs)
    if not m:
        return None
    t = m.group(1)
    if t.startswith("0x"):
        return struct.unpack(">f", bytes.fromhex(t[2:]))[0]
    return float(t)


def broadcast(t, shape):
    """The data of `t` broadcast (numpy rules, equal rank) to `shape`."""
    if t.shape == shape:
        return t.data
    offsets = [0]
    for d, (n, s) in enumerate(zip(shape, strides(t.shape))):
        step = 0 if t.shape[d] == 1 else s
        offsets = [o + k * step for o in offsets for k in range(n)]
    return [t.data[o] for o in offsets]


def elementwise(fn, *ts):
    shape = [max(ds) for ds in zip(*[t.shape for t in ts])]
    return T(shape, list(map(fn, *[broadcast(t, shape) for t in ts])))


def reduce(t, axis, fn):
    shape = list(t.shape)
    shape[axis] = 1
    out = []
    for i in range(prod(shape)):
        idx = unravel(i, shape)
        vals = []
        for k in range(t.shape[axis]):
            idx[axis] = k
            vals.append(t.at(idx))
        out.append(fn(vals))
    return T(shape, out)


def transpose(t, perms):
    shape = [t.shape[p] for p in perms]
    out = []
    for i in range(prod(shape)):
        idx = unravel(i, shape)
        src = [0] * len(shape)
        for o, p in enumerate(perms):
            src[p] = idx[o]
        out.append(t.at(src))
    return T(shape, out)


def matmul(a, b):
    n, m, k = a.shape
    p = b.shape[2]
    out = []
    for bi in range(n):
        block = b.data[bi * k * p:(bi + 1) * k * p]
        cols = [block[j::p] for j in range(p)]
        for i in range(m):
            row = a.data[(bi * m + i) * k:(bi * m + i + 1) * k]
            out.extend(sum(map(float.__mul__, row, col)) for col in cols)
    return T([n, m, p], out)


def exp(x):
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def softmax(t, axis):
    def norm(vals):
        mx = max(vals)
        if mx == -math.inf:
            return [0.0] * len(vals)
        e = [exp(v - mx) for v in vals]
        s = sum(e)
        return [x / s for x in e]
    shape = t.shape
    out = list(t.data)
    inner = prod(shape[axis + 1:])
    for i in range(prod(shape[:axis])):
        for j in range(inner):
            idx = [(i * shape[axis] + k) * inner + j for k in range(shape[axis])]
            vals = norm([t.data[x] for x in idx])
            for x, v in zip(idx, vals):
                out[x] = v
    return T(shape, out)


def attention(q, k, v, mask, scale, causal):
    b, hq, sq, d = q.shape
    hkv, skv, dv = k.shape[1], k.shape[2], v.shape[3]
    g = hq // hkv
    out = []
    for bi in range(b):
        for h in range(hq):
            kh = h // g
            for i in range(sq):
                row = []
                for j in range(skv):
                    s = sum(q.at([bi, h, i, x]) * k.at([bi, kh, j, x])
                            for x in range(d)) * scale
                    if mask is not None:
                        s += mask.at([bi, h, i, j][4 - len(mask.shape):])
                    if causal and j > i + (skv - sq):
                        s = -math.inf
                    row.append(s)
                p = softmax(T([skv], row), 0).data
                for x in range(dv):
                    out.append(sum(p[j] * v.at([bi, kh, j, x])
                                   for j in range(skv)))
    return T([b, hq, sq, dv], out)


def run(func, inputs):
    env = dict(zip([a for a, _ in func["args"]], inputs))
    for op in func["ops"]:
        n, a, ops = op["name"], op["attrs"], [env.get(o) for o in op["operands"]]
        if n == "func.return":
            return ops[0]
        rshape, ret = parse_type(op["rtype"]) if op["rtype"].startswith(
            "tensor") else (None, None)
        if n == "tosa.const":
            m = re.search(r"values = dense<(.*)> : (tensor<[^>]*>)", a)
            shape, et = parse_type(m.group(2))
            r = T(shape, parse_dense(m.group(1), shape, et))
        elif n == "tosa.const_shape":
            r = attr_ints(a, "values")
        elif n == "tosa.reshape":
            r = T(rshape, ops[0].data)
        elif n == "tosa.transpose":
            r = transpose(ops[0], attr_ints(a, "perms"))
        elif n == "tosa.tile":
            t, mult = ops[0], ops[1]
            shape = [x * y for x, y in zip(t.shape, mult)]
            r = T(shape, [t.at([i % d for i, d in zip(unravel(x, shape),
                                                      t.shape)])
                          for x in range(prod(shape))])
        elif n == "tosa.matmul":
            r = matmul(ops[0], ops[1])
        elif n == "tosa.mul":
            r = elementwise(lambda x, y: x * y, ops[0], ops[1])
        elif n == "tosa.add":
            r = elementwise(lambda x, y: x + y, ops[0], ops[1])
        elif n == "tosa.sub":
            r = elementwise(lambda x, y: x - y, ops[0], ops[1])
        elif n == "tosa.pow":
            r = elementwise(lambda x, y: x ** y, ops[0], ops[1])
        elif n == "tosa.select":
            r = elementwise(lambda c, x, y: x if c else y, *ops)
        elif n == "tosa.exp":
            r = elementwise(exp, ops[0])
        elif n == "tosa.erf":
            r = elementwise(math.erf, ops[0])
        elif n == "tosa.tanh":
            r = elementwise(math.tanh, ops[0])
        elif n == "tosa.reciprocal":
            r = elementwise(lambda x: math.inf if x == 0 else 1.0 / x, ops[0])
        elif n == "tosa.rsqrt":
            r = elementwise(lambda x: 1.0 / math.sqrt(x), ops[0])
        elif n == "tosa.reduce_sum":
            r = reduce(ops[0], attr_int(a, "axis"), sum)
        elif n == "tosa.reduce_max":
            r = reduce(ops[0], attr_int(a, "axis"), max)
        elif n == "transformer.softmax":
            r = softmax(ops[0], attr_int(a, "dimension"))
        elif n == "transformer.layer_norm":
            x, gamma, beta = ops
            eps = attr_float(a, "epsilon")
            eps = 1e-5 if eps is None else eps
            nn = x.shape[-1]
            out = []
            for i in range(0, len(x.data), nn):
                row = x.data[i:i + nn]
                mean = sum(row) / nn
                var = sum((y - mean) ** 2 for y in row) / nn
                rs = 1.0 / math.sqrt(var + eps)
                out += [(y - mean) * rs * gamma.data[j] + beta.data[j]
                        for j, y in enumerate(row)]
            r = T(x.shape, out)
        elif n == "transformer.rms_norm":
            x, gamma = ops
            eps = attr_float(a, "epsilon")
            eps = 1e-6 if eps is None else eps
            nn = x.shape[-1]
            out = []
            for i in range(0, len(x.data), nn):
                row = x.data[i:i + nn]
                rs = 1.0 / math.sqrt(sum(y * y for y in row) / nn + eps)
                out += [y * rs * gamma.data[j] for j, y in enumerate(row)]
            r = T(x.shape, out)
        elif n == "transformer.attention":
            q, k, v = ops[:3]
            mask = ops[3] if len(ops) > 3 else None
            scale = attr_float(a, "scale")
            if scale is None:
                scale = 1.0 / math.sqrt(q.shape[3])
            r = attention(q, k, v, mask, scale, "is_causal" in a)
        else:
            raise SystemExit("tosa_eval: unsupported op " + n)
        env[op["res"]] = r
    raise SystemExit("tosa_eval: no return in " + func["name"])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("reference")
    p.add_argument("candidate")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--binary-args", default="",
                   help="comma-separated argument indices that get 0/1 "
                        "values (attention masks)")
    args = p.parse_args()
    ref, cand = parse_module(args.reference), parse_module(args.candidate)
    rng = random.Random(args.seed)
    worst = 0.0
    bad = 0
    for name, f in ref.items():
        binary = {int(i) for i in args.binary_args.split(",") if i}
        inputs = [T(s, [float(rng.random() < 0.7) if i in binary
                        else rng.uniform(-1, 1) for _ in range(prod(s))])
                  for i, (_, (s, _)) in enumerate(f["args"])]
        a = run(f, inputs)
        b = run(cand[name], inputs)
        num = math.sqrt(sum((x - y) ** 2 for x, y in zip(a.data, b.data)))
        den = math.sqrt(sum(x * x for x in a.data)) or 1.0
        err = num / den if a.shape == b.shape else math.inf
        worst = max(worst, err)
        status = "ok" if err <= args.tol else "MISMATCH"
        if err > args.tol:
            bad += 1
        print("%s %s rel_err=%.3g" % (name, status, err))
    print("functions=%d mismatches=%d worst=%.3g" % (len(ref), bad, worst))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
