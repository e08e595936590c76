#!/usr/bin/env python3
"""Evaluates a tfc-import module with numpy, to check its numerics.

A small interpreter for the TOSA ops the importer emits, reading the module in
generic form (`tfc-import --mlir-print-op-generic`). Weights are bound by their
`tfc.name` from the model's safetensors file(s), as the runtime binds them.

  tosa_eval.py fake MODULE MODEL_DIR      tiny model vs. an independent float64
                                          numpy BertModel + mean pool + L2 norm
  tosa_eval.py fixture MODULE MODEL_DIR FIXTURE_DIR
                                          real model vs. the PyTorch fixtures

Needs numpy; re-runs itself under /usr/bin/python3 when the current python
has none (Debian's python3-numpy, installed by scripts/setup.sh).
"""
import json
import math
import os
import re
import struct
import sys

try:
    import numpy as np
except ImportError:
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise

DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": None, "I64": np.int64,
          "I32": np.int32, "F64": np.float64}
ELEM = {"f32": np.float32, "f16": np.float16, "i64": np.int64, "i32": np.int32,
        "i8": np.int8, "i1": np.bool_, "index": np.int64}


def read_safetensors(d):
    out = {}
    files = ["model.safetensors"]
    idx = os.path.join(d, "model.safetensors.index.json")
    if not os.path.exists(os.path.join(d, files[0])) and os.path.exists(idx):
        files = sorted(set(json.load(open(idx))["weight_map"].values()))
    for fn in files:
        raw = open(os.path.join(d, fn), "rb").read()
        n = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8:8 + n])
        for name, t in header.items():
            if name == "__metadata__":
                continue
            b, e = t["data_offsets"]
            a = np.frombuffer(raw[8 + n + b:8 + n + e], dtype=DTYPES[t["dtype"]])
            out[name] = a.reshape(t["shape"])
    return out


def parse_type(t):
    t = t.strip()
    m = re.match(r"tensor<(.*)>$", t)
    if not m:
        return None, None
    dims = re.match(r"^((?:\d+x)*)(\w+)$", m.group(1))
    shape = [int(p) for p in dims.group(1).split("x") if p]
    return shape, ELEM[dims.group(2)]


def parse_number(s):
    s = s.strip()
    if s in ("true", "false"):
        return s == "true"
    if s.startswith("0x"):
        return struct.unpack("<f", struct.pack("<I", int(s, 16)))[0]
    return float(s)


def parse_dense(attrs):
    m = re.search(r"values = dense<(.*?)> : tensor<([^>]*)>", attrs)
    shape, dt = parse_type("tensor<%s>" % m.group(2))
    body = m.group(1)
    if body.startswith("["):
        vals = [parse_number(v) for v in body.strip("[]").replace("[", "").replace("]", "").split(",")]
        return np.array(vals, dtype=dt).reshape(shape)
    return np.full(shape, parse_number(body), dtype=dt)


OP_RE = re.compile(r'^\s*(?:(%\S+) = )?"([\w.]+)"\((.*?)\)(?: <\{(.*)\}>)? : \((.*)\) -> (.*)$')


def run(module_text, inputs, weights):
    env = {}
    m = re.search(r'arg_attrs = \[(.*?)\], function_type', module_text, re.S)
    names = re.findall(r'tfc.name = "([^"]+)"', m.group(1))
    for i, n in enumerate(names):
        env["%%arg%d" % i] = inputs[n] if n in inputs else weights[n]
    for line in module_text.splitlines():
        mm = OP_RE.match(line)
        if not mm:
            continue
        res, op, args, attrs, _, rtype = mm.groups()
        a = [env[x.strip()] for x in args.split(",") if x.strip()]
        attrs = attrs or ""
        if op == "func.return":
            return a[0]
        shape, dt = parse_type(rtype)
        if op in ("tosa.const", "tosa.const_shape"):
            v = parse_dense(attrs)
        elif op == "tosa.reshape":
            v = a[0].reshape([int(x) for x in a[1]])
        elif op == "tosa.transpose":
            perms = [int(x) for x in re.search(r"array<i32: ([^>]*)>", attrs).group(1).split(",")]
            v = np.transpose(a[0], perms)
        elif op == "tosa.matmul":
            v = np.matmul(a[0], a[1])
        elif op == "tosa.add":
            v = a[0] + a[1]
        elif op == "tosa.sub":
            v = a[0] - a[1]
        elif op == "tosa.mul":
            v = a[0] * a[1]
        elif op == "tosa.equal":
            v = a[0] == a[1]
        elif op == "tosa.concat":
            axis = int(re.search(r"axis = (-?\d+)", attrs).group(1))
            v = np.concatenate(a, axis=axis)
        elif op == "tosa.select":
            v = np.where(a[0], a[1], a[2])
        elif op == "tosa.maximum":
            v = np.maximum(a[0], a[1])
        elif op == "tosa.exp":
            v = np.exp(a[0])
        elif op == "tosa.reciprocal":
            v = np.float32(1) / a[0]
        elif op == "tosa.rsqrt":
            v = np.float32(1) / np.sqrt(a[0])
        elif op == "tosa.erf":
            v = np.vectorize(math.erf, otypes=[np.float64])(a[0])
        elif op == "tosa.tanh":
            v = np.tanh(a[0])
        elif op == "tosa.cast":
            v = a[0].astype(dt)
        elif op in ("tosa.reduce_sum", "tosa.reduce_max"):
            axis = int(re.search(r"axis = (-?\d+)", attrs).group(1))
            f = np.sum if op == "tosa.reduce_sum" else np.max
            v = f(a[0], axis=axis, keepdims=True)
        elif op == "tosa.gather":
            vals, idx = a
            v = np.stack([vals[n][idx[n]] for n in range(vals.shape[0])])
        elif op == "tosa.slice":
            sl = tuple(slice(int(s), int(s) + int(n)) for s, n in zip(a[1], a[2]))
            v = a[0][sl]
        else:
            raise SystemExit("tosa_eval: unsupported op " + op)
        if shape is not None:
            v = np.asarray(v).astype(dt, copy=False)
            assert list(v.shape) == shape, (line, v.shape, shape)
        env[res] = v
    raise SystemExit("tosa_eval: no func.return")


def reference_bert(cfg, w, prefix, ids, mask, normalize=True, cls=False):
    """transformers' BertModel (eager) + sentence-transformers, in float64."""
    g = lambda n: w[prefix + n].astype(np.float64)
    eps = cfg.get("layer_norm_eps", 1e-12)
    H, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    dh = H // nh
    B, S = ids.shape

    def ln(x, n):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * g(n + ".weight") + g(n + ".bias")

    def lin(x, n):
        return x @ g(n + ".weight").T + g(n + ".bias")

    erf = np.vectorize(math.erf)
    h = g("embeddings.word_embeddings.weight")[ids] + \
        g("embeddings.token_type_embeddings.weight")[0]
    if cfg.get("model_type") in ("roberta", "xlm-roberta"):
        # create_position_ids_from_input_ids
        pad = cfg.get("pad_token_id", 1)
        keep = (ids != pad).astype(np.int64)
        h = h + g("embeddings.position_embeddings.weight")[
            np.cumsum(keep, 1) * keep + pad]
    else:
        h = h + g("embeddings.position_embeddings.weight")[:S]
    h = ln(h, "embeddings.LayerNorm")
    ext = (1.0 - mask[:, None, None, :].astype(np.float64)) * np.finfo(np.float32).min
    for l in range(cfg["num_hidden_layers"]):
        p = "encoder.layer.%d." % l
        split = lambda x: x.reshape(B, S, nh, dh).transpose(0, 2, 1, 3)
        q = split(lin(h, p + "attention.self.query"))
        k = split(lin(h, p + "attention.self.key"))
        v = split(lin(h, p + "attention.self.value"))
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh) + ext
        s = np.exp(s - s.max(-1, keepdims=True))
        s = s / s.sum(-1, keepdims=True)
        c = (s @ v).transpose(0, 2, 1, 3).reshape(B, S, H)
        h = ln(lin(c, p + "attention.output.dense") + h, p + "attention.output.LayerNorm")
        i = lin(h, p + "intermediate.dense")
        i = 0.5 * i * (1.0 + erf(i / math.sqrt(2.0)))
        h = ln(lin(i, p + "output.dense") + h, p + "output.LayerNorm")
    if cls:
        e = h[:, 0]
    else:
        m = mask[:, :, None].astype(np.float64)
        e = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    if normalize:
        e = e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
    return e


def main():
    mode, module_path, model_dir = sys.argv[1:4]
    text = open(module_path).read()
    weights = read_safetensors(model_dir)
    if mode == "fake":
        cfg = json.load(open(os.path.join(model_dir, "config.json")))
        shape = [int(x) for x in re.search(r"tensor<(\d+)x(\d+)xi64>", text).groups()]
        B, S = shape
        rng = np.random.default_rng(0)
        ids = rng.integers(0, cfg["vocab_size"], size=(B, S)).astype(np.int64)
        if cfg.get("model_type") in ("roberta", "xlm-roberta") and S > 2:
            ids[0, 1] = cfg.get("pad_token_id", 1)  # a padding id inside
        mask = np.ones((B, S), dtype=np.int64)
        for b in range(B):  # row b keeps S - b tokens (at least one)
            mask[b, max(1, S - b):] = 0
        prefix = next(n[:-len("embeddings.word_embeddings.weight")] for n in weights
                      if n.endswith("embeddings.word_embeddings.weight"))
        pooling_cls = "--cls" in sys.argv
        normalize = "--no-normalize" not in sys.argv
        w32 = {k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in weights.items()}
        got = run(text, {"input_ids": ids, "attention_mask": mask}, w32)
        want = reference_bert(cfg, weights, prefix, ids, mask, normalize, pooling_cls)
        tol = 1e-5
    else:
        fixtures = sys.argv[4]
        ids = np.load(os.path.join(fixtures, "input_ids.npy"))
        mask = np.load(os.path.join(fixtures, "attention_mask.npy"))
        want = np.load(os.path.join(fixtures, "embeddings.npy")).astype(np.float64)
        B = int(re.search(r"tensor<(\d+)x\d+xi64>", text).group(1))
        ids, mask, want = ids[:B], mask[:B], want[:B]
        got = run(text, {"input_ids": ids, "attention_mask": mask}, weights)
        tol = 2e-5
    err = float(np.abs(got.astype(np.float64) - want).max())
    print("shape %s max abs error %.3g (tolerance %g)" % (list(got.shape), err, tol))
    if not err <= tol:
        print("tosa_eval: MISMATCH")
        sys.exit(1)
    print("tosa_eval: OK")


if __name__ == "__main__":
    main()
