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
    if name in ("silu", "swish"):
        return silu(x)
    if name == "quick_gelu":
        return x / (1 + np.exp(-1.702 * x))
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


def bert(cfg, w, prefix, ids, mask, normalize=True, cls=False, probs=None):
    """transformers' BertModel (eager; RoBERTa's position ids for
    model_type roberta and xlm-roberta) and sentence-transformers' pooling
    (mean, or the first token with `cls`; L2 normalisation unless
    `normalize` is false), in float64. `w`: the weights by name, each
    under `prefix`; `probs`, when given, gets each layer's attention
    probabilities [B, heads, S, S]."""
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
        if probs is not None:
            probs.append(s)
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


def _attend(s, v, causal, probs):
    """softmax(s) @ v for scores `s` [B, H, Sq, Skv], the future hidden by
    the most negative f32 where `causal` (transformers' create_causal_mask);
    the probabilities appended to `probs` when it is a list."""
    if causal:
        t = s.shape[-1]
        s = s + np.where(np.triu(np.ones((t, t), dtype=bool), 1), F32_MIN,
                         0.0)
    p = softmax(s)
    if probs is not None:
        probs.append(p)
    return p @ v


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


def marian_positions(n, d):
    """MarianSinusoidalPositionalEmbedding's table [n, d]: the angle of
    position p and feature j is p / 10000^(2 (j // 2) / d); sin of the even
    features' angles in the first ceil(d / 2) columns, cos of the odd ones'
    in the rest, rounded to f32."""
    angle = np.arange(n)[:, None] / np.power(
        10000, 2 * (np.arange(d) // 2) / d)[None]
    half = (d + 1) // 2
    out = np.empty((n, d))
    out[:, :half] = np.sin(angle[:, 0::2])
    out[:, half:] = np.cos(angle[:, 1::2])
    return out.astype(np.float32).astype(np.float64)


def encoder_decoder(cfg, w, ids, mask, dec_ids, kv=None, encoded=None,
                    positions=marian_positions, probs=None, quantize=None):
    """transformers' MarianModel, BartModel or MBartModel (cfg's
    model_type) forward, eager attention, decoder_attention_mask None, in
    float64: (the encoder's last hidden state, the decoder's). `w`: the
    weights by name without a "model." prefix; `kv`, when given, gets each
    decoder layer's self-attention keys and values [B, heads, T, dh];
    `encoded`, when given, stands for the encoder's output; `positions(n,
    d)`, Marian's table (as the model holds it in its type); `probs`, when
    given, a dict whose lists "encoder", "decoder" and "cross" get each
    layer's attention probabilities [B, heads, Sq, Skv]; `quantize`, when
    given, is applied to the input of every projection (as
    --quantize-activations does: quantized_activations)."""
    kind = cfg["model_type"]
    d = cfg["d_model"]
    scale = math.sqrt(d) if cfg.get("scale_embedding", False) else 1.0
    pre = kind == "mbart"
    shared = cfg.get("share_encoder_decoder_embeddings", True)
    act = cfg.get("activation_function", "gelu")

    def g(n):
        return w[n].astype(np.float64)

    def ln(x, n):
        return layer_norm(x, g(n + ".weight"), g(n + ".bias"), 1e-5)

    def lin(x, n):
        x = quantize(x) if quantize else x
        return x @ g(n + ".weight").T + g(n + ".bias")

    def attn(n, x, source, heads, add, causal=False, store=None, maps=None):
        q = _heads(lin(x, n + ".q_proj"), heads)
        k = _heads(lin(source, n + ".k_proj"), heads)
        v = _heads(lin(source, n + ".v_proj"), heads)
        if store is not None:
            store.append((k, v))
        s = q @ k.transpose(0, 1, 3, 2) * (d // heads) ** -0.5
        if add is not None:
            s = s + add
        return lin(_merge(_attend(s, v, causal,
                                  None if probs is None else probs[maps])),
                   n + ".out_proj")

    def block(x, norm, f):
        return x + f(ln(x, norm)) if pre else ln(x + f(x), norm)

    def ffn(p):
        return lambda x: lin(activation(act, lin(x, p + "fc1")), p + "fc2")

    def embed(stack, t):
        n = t.shape[1]
        table = g("shared.weight" if shared else stack +
                  ".embed_tokens.weight")
        h = table[t] * scale
        if kind == "marian":
            return h + positions(n, d)
        h = h + g(stack + ".embed_positions.weight")[2:n + 2]
        return ln(h, stack + ".layernorm_embedding")

    ext = (1.0 - mask[:, None, None, :].astype(np.float64)) * F32_MIN
    if encoded is None:
        h = embed("encoder", ids)
        heads = cfg["encoder_attention_heads"]
        for l in range(cfg["encoder_layers"]):
            p = "encoder.layers.%d." % l
            h = block(h, p + "self_attn_layer_norm",
                      lambda x: attn(p + "self_attn", x, x, heads, ext,
                                     maps="encoder"))
            h = block(h, p + "final_layer_norm", ffn(p))
        encoded = ln(h, "encoder.layer_norm") if pre else h
    encoded = np.asarray(encoded, dtype=np.float64)
    h = embed("decoder", dec_ids)
    heads = cfg["decoder_attention_heads"]
    for l in range(cfg["decoder_layers"]):
        p = "decoder.layers.%d." % l
        h = block(h, p + "self_attn_layer_norm",
                  lambda x: attn(p + "self_attn", x, x, heads, None, True,
                                 kv, "decoder"))
        h = block(h, p + "encoder_attn_layer_norm",
                  lambda x: attn(p + "encoder_attn", x, encoded, heads, ext,
                                 maps="cross"))
        h = block(h, p + "final_layer_norm", ffn(p))
    return encoded, ln(h, "decoder.layer_norm") if pre else h


def encoder_decoder_logits(cfg, w, hidden):
    """The LM head of MarianMTModel, BartForConditionalGeneration or
    MBartForConditionalGeneration on the decoder's output: tied to the
    decoder's token table, plus final_logits_bias where `w` has it."""
    shared = cfg.get("share_encoder_decoder_embeddings", True)
    table = w["shared.weight" if shared else "decoder.embed_tokens.weight"]
    out = hidden @ table.astype(np.float64).T
    if "final_logits_bias" in w:
        out = out + w["final_logits_bias"].astype(np.float64)
    return out


def t5_bucket(relative, bidirectional, buckets, max_distance):
    """T5Attention._relative_position_bucket of the relative positions
    (key minus query), its logarithmic buckets in f32 as PyTorch computes
    them."""
    relative = np.asarray(relative, dtype=np.int64)
    out = np.zeros_like(relative)
    if bidirectional:
        buckets //= 2
        out += (relative > 0) * buckets
        relative = np.abs(relative)
    else:
        relative = -np.minimum(relative, 0)
    exact = buckets // 2
    ratio = np.maximum(relative, 1).astype(np.float32) / np.float32(exact)
    large = exact + (np.log(ratio) / np.float32(math.log(max_distance / exact))
                     * np.float32(buckets - exact)).astype(np.int64)
    return out + np.where(relative < exact, relative,
                          np.minimum(large, buckets - 1))


def t5(cfg, w, ids, mask, dec_ids, kv=None, encoded=None, probs=None):
    """transformers' T5Model / T5ForConditionalGeneration forward (eager
    attention, decoder_attention_mask None) in float64: (the encoder's
    final hidden state, the decoder's). Pre-norm layers of T5LayerNorm (RMS,
    no mean, no bias), unscaled scores plus the relative position bias of
    each stack's first layer (bidirectional in the encoder, causal in the
    decoder, none in cross-attention), feed_forward_proj's feed-forward
    ("gated-gelu": gelu_new(wi_0 x) * wi_1 x). `w`: the weights by name;
    `kv`, when given, gets each decoder layer's self-attention keys and
    values [B, heads, T, d_kv]; `encoded`, when given, stands for the
    encoder's output; `probs`, when given ({"encoder": [], "decoder": [],
    "cross": []}), gets each layer's attention probabilities per stack."""
    heads = cfg["num_heads"]
    eps = cfg.get("layer_norm_epsilon", 1e-6)
    proj = cfg.get("feed_forward_proj", "relu")
    gated = proj.startswith("gated-")
    act = "gelu_new" if proj == "gated-gelu" else proj.split("-")[-1]

    def g(n):
        return w[n].astype(np.float64)

    def norm(x, n):
        return rms_norm(x, g(n + ".weight"), eps)

    def lin(x, n):
        return x @ g(n + ".weight").T

    def bias(stack, bidirectional, n):
        rel = np.arange(n)[None, :] - np.arange(n)[:, None]
        table = g(stack + ".block.0.layer.0.SelfAttention."
                  "relative_attention_bias.weight")
        buckets = t5_bucket(rel, bidirectional,
                            cfg.get("relative_attention_num_buckets", 32),
                            cfg.get("relative_attention_max_distance", 128))
        return table[buckets].transpose(2, 0, 1)[None]

    def attn(n, x, source, add, causal=False, store=None, stack=None):
        q = _heads(lin(x, n + ".q"), heads)
        k = _heads(lin(source, n + ".k"), heads)
        v = _heads(lin(source, n + ".v"), heads)
        if store is not None:
            store.append((k, v))
        s = q @ k.transpose(0, 1, 3, 2) + add
        return lin(_merge(_attend(s, v, causal,
                                  None if probs is None else probs[stack])),
                   n + ".o")

    def ffn(n, x):
        if gated:
            x = activation(act, lin(x, n + ".wi_0")) * lin(x, n + ".wi_1")
        else:
            x = activation(act, lin(x, n + ".wi"))
        return lin(x, n + ".wo")

    table = g("shared.weight")
    ext = (1.0 - mask[:, None, None, :].astype(np.float64)) * F32_MIN
    if encoded is None:
        h = table[ids]
        add = bias("encoder", True, ids.shape[1]) + ext
        for l in range(cfg["num_layers"]):
            p = "encoder.block.%d.layer." % l
            x = norm(h, p + "0.layer_norm")
            h = h + attn(p + "0.SelfAttention", x, x, add, stack="encoder")
            h = h + ffn(p + "1.DenseReluDense", norm(h, p + "1.layer_norm"))
        encoded = norm(h, "encoder.final_layer_norm")
    encoded = np.asarray(encoded, dtype=np.float64)
    h = table[dec_ids]
    add = bias("decoder", False, dec_ids.shape[1])
    for l in range(cfg.get("num_decoder_layers") or cfg["num_layers"]):
        p = "decoder.block.%d.layer." % l
        x = norm(h, p + "0.layer_norm")
        h = h + attn(p + "0.SelfAttention", x, x, add, True, kv, "decoder")
        h = h + attn(p + "1.EncDecAttention", norm(h, p + "1.layer_norm"),
                     encoded, ext, stack="cross")
        h = h + ffn(p + "2.DenseReluDense", norm(h, p + "2.layer_norm"))
    return encoded, norm(h, "decoder.final_layer_norm")


def t5_logits(cfg, w, hidden):
    """T5ForConditionalGeneration's LM head on the decoder's output:
    lm_head.weight where `w` has it (else the token table, tied), after
    scaling by d_model^-0.5 when scale_decoder_outputs (default: whether
    tie_word_embeddings is not false)."""
    head = w.get("lm_head.weight", w["shared.weight"]).astype(np.float64)
    if cfg.get("scale_decoder_outputs",
               cfg.get("tie_word_embeddings", True) is not False):
        hidden = hidden * cfg["d_model"] ** -0.5
    return hidden @ head.T


def patch_embedding(pixels, weight, bias=None):
    """nn.Conv2d with kernel = stride = the patch of `weight` [D, C, ph, pw]
    on `pixels` [B, C, H, W], in float64, flattened and transposed as ViT
    and CLIP do: [B, patches, D], the patches row by row."""
    d, _, ph, pw = weight.shape
    x = np.asarray(pixels, dtype=np.float64)
    windows = np.lib.stride_tricks.sliding_window_view(
        x, (ph, pw), axis=(2, 3))[:, :, ::ph, ::pw]
    out = np.einsum("bcijuv,dcuv->bijd", windows,
                    np.asarray(weight, dtype=np.float64))
    if bias is not None:
        out = out + bias
    return out.reshape(x.shape[0], -1, d)


def pre_norm_encoder(h, w, names, layers, heads, eps, act, mask=None,
                     probs=None):
    """ViT's and CLIP's encoder in float64: per layer l, h + out(attention(
    norm1(h))), then h + fc2(act(fc1(norm2(h)))), attention scaled by
    head_dim^-0.5 plus the additive `mask` when given. `w`: the tensors by
    name (float64); `names(l)`: layer l's (norm1, q, k, v, out, norm2, fc1,
    fc2); a bias is added where `w` has it; `probs`, when given, gets each
    layer's attention probabilities [B, heads, S, S]."""
    def lin(x, n):
        y = x @ w[n + ".weight"].T
        return y + w[n + ".bias"] if n + ".bias" in w else y

    def ln(x, n):
        return layer_norm(x, w[n + ".weight"], w[n + ".bias"], eps)

    d = h.shape[-1] // heads
    for l in range(layers):
        n1, q, k, v, o, n2, fc1, fc2 = names(l)
        a = ln(h, n1)
        s = _heads(lin(a, q), heads) @ \
            _heads(lin(a, k), heads).transpose(0, 1, 3, 2) * d ** -0.5
        if mask is not None:
            s = s + mask
        p = softmax(s)
        if probs is not None:
            probs.append(p)
        h = h + lin(_merge(p @ _heads(lin(a, v), heads)), o)
        h = h + lin(activation(act, lin(ln(h, n2), fc1)), fc2)
    return h
