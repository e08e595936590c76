"""Evaluates TOSA and transformer functions in MLIR generic form with numpy.

A small interpreter for the ops the fusion tests and the importer use,
reading modules printed with --mlir-print-op-generic; the transformer ops
are evaluated by their definition (reference.py, the docs of
TransformerOps.td). Two uses:

  python3 -m tfc_testing.tosa_eval compare REF CAND [--seed N] [--tol T]
          [--binary-args I,J]
      every function of REF and the one of the same name in CAND on the
      same seeded random inputs (uniform in [-1, 1]; 0/1 for the argument
      indices of --binary-args), all in float64: the relative difference of
      each (a fusion must keep the values). Exits 1 when one differs by more
      than --tol (default 1e-4).
  python3 -m tfc_testing.tosa_eval fake MODULE MODEL_DIR [--cls]
          [--no-normalize]
      a tiny model (tests/Importer/Inputs/make_fake_bert.py) imported by
      tfc-import, every result rounded to its declared type and weights
      bound by their tfc.name from the model's safetensors file(s), as the
      runtime binds them, against an independent float64 BertModel with
      sentence-transformers' pooling (reference.bert) within 1e-5
  python3 -m tfc_testing.tosa_eval fixture MODULE MODEL_DIR FIXTURE_DIR
      the real model against the PyTorch fixtures (tests/fixtures/minilm)
      within 2e-5

Needs numpy; re-runs itself under /usr/bin/python3 when the current python
has none (Debian's python3-numpy, installed by scripts/setup.sh).
"""

import argparse
import json
import math
import os
import random
import re
import struct
import sys

try:
    import numpy as np
except ImportError:
    if sys.executable != "/usr/bin/python3" and \
            os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3",
                 ["/usr/bin/python3", "-m", "tfc_testing.tosa_eval"] +
                 sys.argv[1:])
    raise

from tfc_testing import reference, safetensors_file  # noqa: E402

ELEM = {"f64": np.float64, "f32": np.float32, "f16": np.float16,
        "i64": np.int64, "i32": np.int32, "i16": np.int16, "i8": np.int8,
        "i1": np.bool_, "index": np.int64}


def parse_type(text):
    """tensor<2x3xf32> -> ([2, 3], "f32"); (None, None) for other types."""
    m = re.match(r"tensor<((?:\d+x)*)(\w+)>$", text.strip())
    if not m:
        return None, None
    return [int(d) for d in m.group(1).split("x") if d], m.group(2)


def parse_dense(text, shape, et):
    """The values of dense<TEXT> : tensor<SHAPE x ET>, flat: floats, ints or
    bools (a splat repeated)."""
    text = text.strip()
    n = math.prod(shape)
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
        fmt = {"f32": "f", "f16": "e", "i8": "b", "i32": "i", "i64": "q"}[et]
        size = struct.calcsize(fmt)
        vals = [struct.unpack("<" + fmt, raw[i:i + size])[0]
                for i in range(0, len(raw), size)]
        return vals * n if len(vals) == 1 else vals
    vals = []
    for t in re.findall(r"0x[0-9A-Fa-f]+|true|false|[-+0-9.eEinfa]+", text):
        if t.startswith("0x"):
            vals.append(parse_dense(t, [1], et)[0])
        elif t in ("true", "false"):
            vals.append(t == "true")
        elif et.startswith("i") and re.fullmatch(r"[-+]?\d+", t):
            vals.append(int(t))
        else:
            vals.append(float(t))
    return vals * n if len(vals) == 1 else vals


OP_RE = re.compile(
    r'^\s*(?:(%[\w#]+)(?::\d+)? = )?"([\w.]+)"\((.*?)\)'
    r'(?: <\{(.*)\}>)? : \((.*)\) -> (.*)$')


def parse_module(text):
    """{name: function} of a module's text: each function's arguments
    [(ssa name, (shape, element type))], their tfc.name attributes (where
    the importer wrote them) and its ops in order."""
    funcs = {}
    cur = None
    for line in text.splitlines():
        if '"func.func"' in line:
            name = re.search(r'sym_name = "([\w.]+)"', line).group(1)
            m = re.search(r"arg_attrs = \[(.*?)\], function_type", line)
            cur = {"name": name, "args": [], "ops": [],
                   "arg_names": re.findall(r'tfc.name = "([^"]+)"',
                                           m.group(1)) if m else []}
            funcs[name] = cur
            continue
        m = re.match(r"\s*\^bb0\((.*)\):", line)
        if m and cur is not None and not cur["args"]:
            cur["args"] = [(a.group(1), parse_type(a.group(2))) for a in
                           re.finditer(r"(%\w+): (tensor<[^>]*>)",
                                       m.group(1))]
            continue
        m = OP_RE.match(line)
        if m and cur is not None:
            res, name, operands, attrs, _, rtype = m.groups()
            cur["ops"].append({
                "res": res, "name": name,
                "operands": [o.strip() for o in operands.split(",")
                             if o.strip()],
                "attrs": attrs or "", "rtype": rtype.strip()})
    return funcs


def attr_int(attrs, key):
    m = re.search(key + r" = (-?\d+)", attrs)
    return int(m.group(1)) if m else None


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


def const(attrs, typed):
    m = re.search(r"values = dense<(.*)> : (tensor<[^>]*>)", attrs)
    shape, et = parse_type(m.group(2))
    vals = parse_dense(m.group(1), shape, et)
    dtype = ELEM[et] if typed or not et.startswith("f") else np.float64
    return np.array(vals, dtype=dtype).reshape(shape)


def erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


ELEMENTWISE = {
    "tosa.add": lambda a: a[0] + a[1],
    "tosa.sub": lambda a: a[0] - a[1],
    "tosa.mul": lambda a: a[0] * a[1],
    "tosa.pow": lambda a: np.power(a[0], a[1]),
    "tosa.maximum": lambda a: np.maximum(a[0], a[1]),
    "tosa.equal": lambda a: a[0] == a[1],
    "tosa.select": lambda a: np.where(a[0], a[1], a[2]),
    "tosa.exp": lambda a: np.exp(a[0]),
    "tosa.erf": lambda a: erf(a[0]),
    "tosa.tanh": lambda a: np.tanh(a[0]),
    "tosa.reciprocal": lambda a: 1 / a[0],
    "tosa.rsqrt": lambda a: 1 / np.sqrt(a[0]),
    "tosa.matmul": lambda a: np.matmul(a[0], a[1]),
}


def evaluate(name, a, attrs, shape, dtype, typed):
    """One op's result from its operands `a`."""
    if name in ELEMENTWISE:
        return ELEMENTWISE[name](a)
    if name in ("tosa.const", "tosa.const_shape"):
        v = const(attrs, typed)
        return [int(x) for x in v] if name == "tosa.const_shape" else v
    if name == "tosa.reshape":
        return a[0].reshape(shape)
    if name == "tosa.transpose":
        return np.transpose(a[0], attr_ints(attrs, "perms"))
    if name == "tosa.tile":
        return np.tile(a[0], a[1])
    if name == "tosa.concat":
        return np.concatenate(a, axis=attr_int(attrs, "axis"))
    if name == "tosa.cast":  # untyped: floats stay float64
        exact = not typed and np.dtype(dtype).kind == "f"
        return a[0].astype(np.float64 if exact else dtype)
    if name in ("tosa.reduce_sum", "tosa.reduce_max"):
        f = np.sum if name == "tosa.reduce_sum" else np.max
        return f(a[0], axis=attr_int(attrs, "axis"), keepdims=True)
    if name == "tosa.gather":
        values, index = a
        return np.stack([values[n][index[n]] for n in range(len(values))])
    if name == "tosa.slice":
        return a[0][tuple(slice(s, s + n) for s, n in zip(a[1], a[2]))]
    if name == "transformer.softmax":
        return reference.softmax(a[0], attr_int(attrs, "dimension"))
    if name == "transformer.layer_norm":
        eps = attr_float(attrs, "epsilon")
        return reference.layer_norm(a[0], a[1], a[2],
                                    1e-5 if eps is None else eps)
    if name == "transformer.rms_norm":
        eps = attr_float(attrs, "epsilon")
        return reference.rms_norm(a[0], a[1], 1e-6 if eps is None else eps)
    if name == "transformer.attention":
        return reference.attention(
            a[0], a[1], a[2], a[3] if len(a) > 3 else None,
            attr_float(attrs, "scale"), "is_causal" in attrs,
            attr_float(attrs, "softcap"), attr_int(attrs, "window"))
    raise SystemExit("tosa_eval: unsupported op " + name)


def run(func, inputs, typed=False):
    """The value `func` returns for `inputs` (in argument order). With
    `typed` every result is rounded to its declared element type, as a
    compiled build computes; without, floats stay float64."""
    env = dict(zip([a for a, _ in func["args"]], inputs))
    with np.errstate(all="ignore"):  # inf and NaN are values here
        for op in func["ops"]:
            a = [env[o] for o in op["operands"]]
            if op["name"] == "func.return":
                return a[0]
            shape, et = parse_type(op["rtype"])
            dtype = ELEM.get(et)
            v = evaluate(op["name"], a, op["attrs"], shape, dtype, typed)
            if shape is not None:
                v = np.asarray(v)
                if typed:
                    v = v.astype(dtype, copy=False)
                assert list(v.shape) == shape, (op, v.shape, shape)
            env[op["res"]] = v
    raise SystemExit("tosa_eval: no return in " + func["name"])


def compare(args):
    with open(args.reference) as f:
        ref = parse_module(f.read())
    with open(args.candidate) as f:
        cand = parse_module(f.read())
    rng = random.Random(args.seed)
    binary = {int(i) for i in args.binary_args.split(",") if i}
    worst, bad = 0.0, 0
    for name, f in ref.items():
        inputs = [np.array([float(rng.random() < 0.7) if i in binary
                            else rng.uniform(-1, 1)
                            for _ in range(math.prod(s))]).reshape(s)
                  for i, (_, (s, _)) in enumerate(f["args"])]
        a = run(f, inputs)
        b = run(cand[name], inputs)
        if a.shape == b.shape:
            den = float(np.sqrt(np.sum(a * a))) or 1.0
            err = float(np.sqrt(np.sum((a - b) ** 2))) / den
        else:
            err = math.inf
        worst = max(worst, err)
        if err > args.tol:
            bad += 1
        print("%s %s rel_err=%.3g" % (name, "ok" if err <= args.tol
                                      else "MISMATCH", err))
    print("functions=%d mismatches=%d worst=%.3g" % (len(ref), bad, worst))
    return 1 if bad else 0


def check_model(args):
    """fake and fixture: the module's only function against the
    reference."""
    with open(args.module) as f:
        text = f.read()
    (func,) = parse_module(text).values()
    weights = safetensors_file.read(args.model_dir)
    if args.mode == "fake":
        with open(os.path.join(args.model_dir, "config.json")) as f:
            cfg = json.load(f)
        B, S = func["args"][0][1][0]
        rng = np.random.default_rng(0)
        ids = rng.integers(0, cfg["vocab_size"], size=(B, S)).astype(np.int64)
        if cfg.get("model_type") in ("roberta", "xlm-roberta") and S > 2:
            ids[0, 1] = cfg.get("pad_token_id", 1)  # a padding id inside
        mask = np.ones((B, S), dtype=np.int64)
        for b in range(B):  # row b keeps S - b tokens (at least one)
            mask[b, max(1, S - b):] = 0
        prefix = next(n[:-len("embeddings.word_embeddings.weight")]
                      for n in weights
                      if n.endswith("embeddings.word_embeddings.weight"))
        bound = {k: v.astype(np.float32) if v.dtype == np.float16 else v
                 for k, v in weights.items()}
        want = reference.bert(cfg, weights, prefix, ids, mask,
                              not args.no_normalize, args.cls)
        tol = 1e-5
    else:
        ids = np.load(os.path.join(args.fixtures, "input_ids.npy"))
        mask = np.load(os.path.join(args.fixtures, "attention_mask.npy"))
        want = np.load(os.path.join(args.fixtures, "embeddings.npy")).astype(
            np.float64)
        B = func["args"][0][1][0][0]
        ids, mask, want = ids[:B], mask[:B], want[:B]
        bound = weights
        tol = 2e-5
    given = {"input_ids": ids, "attention_mask": mask}
    got = run(func, [given[n] if n in given else bound[n]
                     for n in func["arg_names"]], typed=True)
    err = float(np.abs(got.astype(np.float64) - want).max())
    print("shape %s max abs error %.3g (tolerance %g)" % (list(got.shape),
                                                          err, tol))
    if not err <= tol:
        print("tosa_eval: MISMATCH")
        return 1
    print("tosa_eval: OK")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("compare")
    c.add_argument("reference")
    c.add_argument("candidate")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--tol", type=float, default=1e-4)
    c.add_argument("--binary-args", default="",
                   help="comma-separated argument indices that get 0/1 "
                        "values (attention masks)")
    for mode in ("fake", "fixture"):
        m = sub.add_parser(mode)
        m.add_argument("module")
        m.add_argument("model_dir")
        if mode == "fixture":
            m.add_argument("fixtures")
        else:
            m.add_argument("--cls", action="store_true")
            m.add_argument("--no-normalize", action="store_true")
    args = p.parse_args()
    return compare(args) if args.mode == "compare" else check_model(args)


if __name__ == "__main__":
    sys.exit(main())
