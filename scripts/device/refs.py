"""Float64 references, in PyTorch, for every numerics model of specs.py.

Each takes the model's reference parameters (spec["ref"]) and its inputs by
name as float64 tensors (on the GPU on the device machine, on the CPU in the
dry run) and returns the float64 output. Written for PyTorch 1.13 (the dry
run's) as well as 2.x: nothing newer than 1.13 is used.
"""

import math

import torch


def attention(p, x):
    """softmax(Q K^T * scale + mask) V, causal as in tfc: key j is visible to
    query i iff j <= i + Skv - Sq; a row that sees no key is 0 (not NaN);
    grouped-query heads by repeat_interleave."""
    q, k, v = x["q"], x["k"], x["v"]
    g = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(g, dim=1)
    v = v.repeat_interleave(g, dim=1)
    s = q @ k.transpose(-1, -2) * p["scale"]
    if "mask" in x:
        s = s + x["mask"]
    if p["causal"]:
        sq, skv = q.shape[2], k.shape[2]
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(skv, device=q.device)[None, :]
        s = s.masked_fill(j > i + skv - sq, -math.inf)
    mx = s.amax(-1, keepdim=True)
    mx = mx.masked_fill(~torch.isfinite(mx), 0)
    e = torch.exp(s - mx)
    total = e.sum(-1, keepdim=True)
    return e / total.masked_fill(total == 0, 1) @ v


def softmax(p, x):
    return torch.softmax(x["x"], dim=p["dim"])


def _layer_norm(x, gamma, beta, eps):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


def f32(value):
    """A constant as the f32 attribute or tensor in the MLIR holds it."""
    return float(torch.tensor(value, dtype=torch.float32))


def layer_norm(p, x):
    return _layer_norm(x["x"], x["gamma"], x["beta"], f32(p["eps"]))


def rms_norm(p, x):
    v = x["x"]
    eps = f32(p["eps"])
    return v / torch.sqrt((v * v).mean(-1, keepdim=True) + eps) * x["gamma"]


def matmul(p, x):
    """A @ B; B given as [batch, n, k] where p["weight"]."""
    b = x["b"]
    return x["a"] @ (b.transpose(-1, -2) if p.get("weight") else b)


def _heads(t, n):
    """[B, S, n*d] -> [B, n, S, d]"""
    b, s, h = t.shape
    return t.reshape(b, s, n, h // n).transpose(1, 2)


def _merge(t):
    b, n, s, d = t.shape
    return t.transpose(1, 2).reshape(b, s, n * d)


def bert_layer(p, x):
    """examples/bert-layer: post-LN, 4 heads, scale 0.25, extended mask
    (1 - mask) * -10000, exact (erf) GELU, LayerNorm eps 1e-12."""
    h, n = x["hidden"], 4
    q = _heads(h @ x["wq"] + x["bq"], n)
    k = _heads(h @ x["wk"] + x["bk"], n)
    v = _heads(h @ x["wv"] + x["bv"], n)
    ext = ((1 - x["attention_mask"]) * -10000.0)[:, None, None, :]
    probs = torch.softmax(q @ k.transpose(-1, -2) * 0.25 + ext, dim=-1)
    attn = _merge(probs @ v) @ x["wo"] + x["bo"]
    eps = f32(1e-12)
    ln1 = _layer_norm(attn + h, x["ln1_gamma"], x["ln1_beta"], eps)
    f = ln1 @ x["w1"] + x["b1"]
    gelu = 0.5 * f * (1 + torch.erf(f * 0.7071067811865475))
    return _layer_norm(gelu @ x["w2"] + x["b2"] + ln1, x["ln2_gamma"],
                       x["ln2_beta"], eps)


def gpt_layer(p, x):
    """examples/gpt-layer: pre-LN, 4 heads, scores / 4, causal by
    where(tril, w, finfo(f32).min), tanh GELU, LayerNorm eps 1e-5."""
    h, n = x["hidden"], 4
    eps = f32(1e-5)
    ln1 = _layer_norm(h, x["ln1_gamma"], x["ln1_beta"], eps)
    q = _heads(ln1 @ x["wq"] + x["bq"], n)
    k = _heads(ln1 @ x["wk"] + x["bk"], n)
    v = _heads(ln1 @ x["wv"] + x["bv"], n)
    s = q @ k.transpose(-1, -2) * 0.25
    sq = s.shape[-1]
    keep = torch.ones(sq, sq, dtype=torch.bool, device=s.device).tril()
    s = s.masked_fill(~keep, -3.4028234663852886e38)
    attn = _merge(torch.softmax(s, dim=-1) @ v) @ x["wo"] + x["bo"]
    res1 = h + attn
    ln2 = _layer_norm(res1, x["ln2_gamma"], x["ln2_beta"], eps)
    m = ln2 @ x["w1"] + x["b1"]
    gelu = 0.5 * m * (1 + torch.tanh(0.7978845608028654 *
                                     (m + 0.044715 * m ** 3)))
    return res1 + gelu @ x["w2"] + x["b2"]


REFERENCES = {"attention": attention, "softmax": softmax,
              "layer_norm": layer_norm, "rms_norm": rms_norm,
              "matmul": matmul,
              "bert_layer": bert_layer, "gpt_layer": gpt_layer}


def reference(spec, inputs):
    """inputs: {name: float64 tensor}."""
    return REFERENCES[spec["ref"]["op"]](spec["ref"], inputs)
