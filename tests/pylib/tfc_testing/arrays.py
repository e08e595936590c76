"""Arrays for the numerics checks: bf16 bits, errors, random inputs (token
batches, weights) and roundings of them."""

import math

import numpy as np


def relative_error(got, ref):
    """|got - ref| / |ref| in the Frobenius norm, in float64."""
    ref = np.asarray(ref, dtype=np.float64)
    return np.linalg.norm(np.asarray(got, dtype=np.float64) - ref) / max(
        np.linalg.norm(ref), 1e-30)


def one_ulp_moves(rng, inputs):
    """`inputs` with every float element moved one ulp up or down at
    random; other inputs unchanged."""
    moved = []
    for x in inputs:
        if x.dtype.kind == "f":
            up = rng.integers(0, 2, x.shape).astype(bool)
            x = np.nextafter(x, np.where(up, np.inf, -np.inf).astype(x.dtype))
        moved.append(x)
    return moved


def f32_to_bf16(x):
    """bf16 bits ('<u2', as tfc-run reads and writes bf16) of x's f32 values,
    rounded to nearest even."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_to_f32(bits):
    """The f32 values of bf16 bits ('<u2')."""
    return (np.asarray(bits).view(np.uint16).astype(np.uint32) << 16).view(
        np.float32)


def rounded_weights(w, dtype):
    """The weights `w` (name -> f32 array) rounded to `dtype` (f16 or
    bf16, to nearest even) and back to f32; f32 leaves them."""
    if dtype == "f16":
        return {k: v.astype(np.float16).astype(np.float32)
                for k, v in w.items()}
    if dtype == "bf16":
        return {k: bf16_to_f32(f32_to_bf16(v)) for k, v in w.items()}
    return w


def random_weights(rng, shapes, tables, gain=1.0):
    """{name: f32 array} for {name: shape}: norm gains (names ending in
    norm.weight) `gain` + 0.1 N(0, 1), token tables and LM heads (names
    containing one of `tables`) N(0, 1), other matrices 1.5 / sqrt(fan-in)
    N(0, 1), vectors (biases) 0.1 N(0, 1)."""
    out = {}
    for name, shape in shapes.items():
        if name.endswith("norm.weight"):
            x = gain + 0.1 * rng.standard_normal(shape)
        elif len(shape) == 2 and any(t in name for t in tables):
            x = rng.standard_normal(shape)
        elif len(shape) == 2:
            x = rng.standard_normal(shape) / math.sqrt(shape[1]) * 1.5
        else:
            x = 0.1 * rng.standard_normal(shape)
        out[name] = x.astype(np.float32)
    return out


def random_tokens(rng, vocab, batch, seq, padding=0):
    """ids [batch, seq] (int64, below `vocab`) and an attention mask whose
    second row has its last `padding` tokens padded."""
    ids = rng.integers(0, vocab, (batch, seq)).astype(np.int64)
    mask = np.ones((batch, seq), dtype=np.int64)
    if padding:
        mask[1, seq - padding:] = 0
    return ids, mask
