"""float64 numpy references of what tfc computes: attention, softmax, the
norms, the activations, weight and activation quantization, BERT (as
transformers' BertModel with sentence-transformers' pooling) and the two
example layers (examples/bert-layer, examples/gpt-layer)."""

import math

import numpy as np

# The most negative f32: the fill frameworks write for hidden keys.
F32_MIN = float(np.finfo(np.float32).min)


def f32(value):
    """A constant as an f32 attribute or tensor of the MLIR holds it."""
    return float(np.float32(value))


def softmax(x, axis=-1):
    """exp(x - max) / sum along `axis`; a row that is all -inf (no visible
    key) gives 0, not NaN."""
    mx = x.max(axis, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(mx), mx, 0))
    total = e.sum(axis, keepdims=True)
    return np.where(total > 0, e / np.where(total > 0, total, 1), 0)


def attention(q, k, v, mask=None, scale=None, causal=False, softcap=None,
              window=None):
    """transformer.attention in float64: softmax(Q K^T * scale [capped to
    softcap * tanh(s / softcap)] + mask) V, grouped-query heads by
    repeating K and V; causal as tfc defines it (key j visible to query i
    iff j <= i + Skv - Sq), `window` hiding key j from query i when
    i + Skv - Sq - j >= window; a row that sees no key is 0 (not NaN).
    scale defaults to 1 / sqrt(D)."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    g = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    s = q @ k.transpose(0, 1, 3, 2) * scale
    if softcap is not None:
        s = softcap * np.tanh(s / softcap)
    if mask is not None:
        s = s + np.asarray(mask, dtype=np.float64)
    sq, skv = q.shape[2], k.shape[2]
    i = np.arange(sq)[:, None]
    j = np.arange(skv)[None, :]
    if causal:
        s = np.where(j <= i + skv - sq, s, -np.inf)
    if window is not None:
        s = np.where(i + skv - sq - j < window, s, -np.inf)
    return softmax(s) @ v


def layer_norm(x, g, b, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * g + b


def rms_norm(x, g, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) *
                                  (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def silu(x):
    return x / (1 + np.exp(-x))


def activation(name, x):
    """A transformers activation (hidden_act) by its name."""
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return gelu_tanh(x)
    if name == "gelu":
        return gelu_erf(x)
    assert name == "relu", name
    return np.maximum(x, 0)


def decoder_masks(mask, s, window=None):
    """A decoder's additive masks [B, 1, S, S] for the attention mask
    [B, S] (0: padding), as transformers' _update_causal_mask writes them:
    the most negative f32 where the key is in the future or padding; and
    with `window`, the sliding layers' mask, which also hides key j from
    query i when i - j >= window (the causal one again without it)."""
    hidden = np.triu(np.ones((s, s), dtype=bool), 1)[None, None] | \
        (mask == 0)[:, None, None, :]
    causal = np.where(hidden, F32_MIN, 0.0)
    if window is None:
        return causal, causal
    i, j = np.arange(s)[:, None], np.arange(s)[None, :]
    return causal, np.where(hidden | (i - j >= window), F32_MIN, 0.0)


def quantized_weight(x, axis, bits, group=None):
    """A weight as --quantize-weights=int8 / int4 quantizes it (ukernels.h's
    TFC_UK_QUANTIZE_I8 / _I4), in float64: per output feature and group of
    input features along `axis` (all of them for int8, 128 for int4, or
    `group`), the scale max|x| / qmax (127, 7) and the values rint(x /
    scale) in [-qmax, qmax], in f32 arithmetic; returns values times
    scales."""
    x = np.asarray(x, dtype=np.float32)
    qmax = np.float32(127 if bits == 8 else 7)
    group = group or (x.shape[axis] if bits == 8 else 128)
    out = np.empty(x.shape, dtype=np.float64)
    for g0 in range(0, x.shape[axis], group):
        part = np.take(x, range(g0, min(g0 + group, x.shape[axis])), axis)
        scale = np.abs(part).max(axis=axis, keepdims=True) / qmax
        safe = np.where(scale == 0, np.float32(1), scale)
        q = np.where(scale == 0, np.float32(0),
                     np.clip(np.rint(part / safe), -qmax, qmax))
        index = [slice(None)] * x.ndim
        index[axis] = slice(g0, g0 + part.shape[axis])
        out[tuple(index)] = q.astype(np.float64) * scale.astype(np.float64)
    return out


def quantized_activations(x):
    """The input of a quantized weight's product as
    --quantize-activations=int8 quantizes it (TFC_UK_QUANTIZE_A8): each row
    (the last axis) in blocks of 128, int8."""
    return quantized_weight(x, np.ndim(x) - 1, 8, 128)


def bert(cfg, w, prefix, ids, mask, normalize=True, cls=False):
    """transformers' BertModel (eager; RoBERTa's position ids for
    model_type roberta and xlm-roberta) and sentence-transformers' pooling
    (mean, or the first token with `cls`; L2 normalisation unless
    `normalize` is false), in float64. `w`: the weights by name, each
    under `prefix`."""
    def g(n):
        return w[prefix + n].astype(np.float64)
    eps = cfg.get("layer_norm_eps", 1e-12)
    H, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    dh = H // nh
    B, S = ids.shape

    def ln(x, n):
        return layer_norm(x, g(n + ".weight"), g(n + ".bias"), eps)

    def lin(x, n):
        return x @ g(n + ".weight").T + g(n + ".bias")

    def split(x):
        return x.reshape(B, S, nh, dh).transpose(0, 2, 1, 3)

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
    ext = (1.0 - mask[:, None, None, :].astype(np.float64)) * F32_MIN
    for l in range(cfg["num_hidden_layers"]):
        p = "encoder.layer.%d." % l
        q = split(lin(h, p + "attention.self.query"))
        k = split(lin(h, p + "attention.self.key"))
        v = split(lin(h, p + "attention.self.value"))
        s = softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh) + ext)
        c = (s @ v).transpose(0, 2, 1, 3).reshape(B, S, H)
        h = ln(lin(c, p + "attention.output.dense") + h,
               p + "attention.output.LayerNorm")
        i = gelu_erf(lin(h, p + "intermediate.dense"))
        h = ln(lin(i, p + "output.dense") + h, p + "output.LayerNorm")
    if cls:
        e = h[:, 0]
    else:
        m = mask[:, :, None].astype(np.float64)
        e = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    if normalize:
        e = e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
    return e


def _heads(t, n):
    """[B, S, n*d] -> [B, n, S, d]"""
    b, s, h = t.shape
    return t.reshape(b, s, n, h // n).transpose(0, 2, 1, 3)


def _merge(t):
    b, n, s, d = t.shape
    return t.transpose(0, 2, 1, 3).reshape(b, s, n * d)


def bert_layer(x):
    """examples/bert-layer on the inputs `x` (by argument name): post-LN, 4
    heads, scale 0.25, extended mask (1 - mask) * -10000, exact (erf) GELU,
    LayerNorm eps 1e-12."""
    h, n = x["hidden"], 4
    q = _heads(h @ x["wq"] + x["bq"], n)
    k = _heads(h @ x["wk"] + x["bk"], n)
    v = _heads(h @ x["wv"] + x["bv"], n)
    ext = ((1 - x["attention_mask"]) * -10000.0)[:, None, None, :]
    probs = softmax(q @ k.transpose(0, 1, 3, 2) * 0.25 + ext)
    attn = _merge(probs @ v) @ x["wo"] + x["bo"]
    eps = f32(1e-12)
    ln1 = layer_norm(attn + h, x["ln1_gamma"], x["ln1_beta"], eps)
    f = gelu_erf(ln1 @ x["w1"] + x["b1"])
    return layer_norm(f @ x["w2"] + x["b2"] + ln1, x["ln2_gamma"],
                      x["ln2_beta"], eps)


def gpt_layer(x):
    """examples/gpt-layer on the inputs `x` (by argument name): pre-LN, 4
    heads, scores / 4, causal by where(tril, w, finfo(f32).min), tanh GELU,
    LayerNorm eps 1e-5."""
    h, n = x["hidden"], 4
    eps = f32(1e-5)
    ln1 = layer_norm(h, x["ln1_gamma"], x["ln1_beta"], eps)
    q = _heads(ln1 @ x["wq"] + x["bq"], n)
    k = _heads(ln1 @ x["wk"] + x["bk"], n)
    v = _heads(ln1 @ x["wv"] + x["bv"], n)
    s = q @ k.transpose(0, 1, 3, 2) * 0.25
    keep = np.tril(np.ones((s.shape[-1],) * 2, dtype=bool))
    s = np.where(keep, s, F32_MIN)
    attn = _merge(softmax(s) @ v) @ x["wo"] + x["bo"]
    res1 = h + attn
    ln2 = layer_norm(res1, x["ln2_gamma"], x["ln2_beta"], eps)
    m = gelu_tanh(ln2 @ x["w1"] + x["b1"])
    return res1 + m @ x["w2"] + x["b2"]
