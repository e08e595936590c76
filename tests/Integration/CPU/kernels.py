"""Numerics of the compiled attention, softmax, layer_norm and rms_norm
kernels, fused and unfused, against float64 references over many shapes (odd
sizes, one query row, causal with Sq != Skv, fully masked rows, grouped-query
heads, soft-capped scores, sliding windows, f16/bf16 norms).

usage: kernels.py BINDIR WORKDIR [SEED] [--target=cpu|nvptx]
                  [--gpu-binary=cubin|ptx]
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "pylib"))
from tfc_testing import attention, mlir, reference  # noqa: E402
from tfc_testing.arrays import bf16_to_f32, f32_to_bf16  # noqa: E402
# The GPU kernels' builds, as the device check makes them (tfc-compile
# flags by name; the default build is wgmma on TMA tiles, "tma2").
from tfc_testing.gpu_builds import GPU_VARIANTS  # noqa: E402
from tfc_testing.harness import start  # noqa: E402
from tfc_testing.mlir import tensor_type  # noqa: E402


def attention_case(h, rng, name, b, hq, hkv, sq, skv, d, dv=None, mask=None,
                   causal=False, scale=None, dtype="f32", key_growth=0.0,
                   key_spike=None, softcap=None, window=None):
    """key_growth > 0 scales key j by 1 + key_growth * j / skv: later key
    blocks then exceed the running max of the earlier ones by far.
    key_spike = j scales key j by 64: its scores dwarf those of the keys
    before it in the same block. softcap caps the scaled scores to
    softcap * tanh(s / softcap) (Gemma 2). window hides key j from query i
    when i + skv - sq - j >= window (a sliding window)."""
    dv = dv or d
    np_dtype = np.float16 if dtype == "f16" else np.float32
    q = rng.standard_normal((b, hq, sq, d)).astype(np_dtype)
    k = rng.standard_normal((b, hkv, skv, d))
    k *= (1 + key_growth * np.arange(skv) / skv)[:, None]
    if key_spike is not None:
        k[:, :, key_spike, :] *= 64
    k = k.astype(np_dtype)
    v = rng.standard_normal((b, hkv, skv, dv)).astype(np_dtype)
    inputs = [q, k, v]
    m = None
    if mask is not None:
        m = mask(rng, b, hq, sq, skv).astype(np_dtype)
        inputs.append(m)
    source = attention.function(b, hq, hkv, sq, skv, d, dv, dtype,
                                None if m is None else m.shape, causal, scale,
                                softcap, window)
    ref = reference.attention(q, k, v, m, scale, causal, softcap, window)
    # f16 inputs and outputs carry 11 significant bits (the unfused build
    # also computes in f16): a few units of 2^-11 in a norm-wise error.
    tol = 5e-3 if dtype == "f16" else 1e-4
    builds = [("fused", True, []), ("unfused", False, [])]
    # On nvptx, few query rows per KV head take the split-KV decode kernel;
    # the tiled kernels' variants below still run these shapes without it.
    tiled = []
    if h.target == "nvptx" and hq // hkv * sq <= 8:
        tiled = ["--gpu-decode-kernel=false"]
        builds.append(("fused tiled", True, tiled))
        # The decode kernel on tensor cores (f16, D multiple of 16).
        builds.append(("fused decode mma", True, ["--gpu-decode-mma"]))
    if dtype == "f16" and h.target == "nvptx":
        # The tensor-core kernels: mma.sync (K/V staged through registers,
        # fragments by ldmatrix, tiles by cp.async, 16 or 32 query rows per
        # warp) and wgmma (cp.async or TMA tiles, one or two warpgroups, a
        # producer warpgroup); the default build is "tma2".
        builds += [("fused " + v, True, f) for v, f in GPU_VARIANTS.items()
                   if v != "tma2"]
        builds.append(("fused mma 32 rows/warp", True,
                       ["--gpu-arch=sm_90", "--gpu-async-copy=false",
                        "--gpu-warp-rows=32"]))
        # The unfused graph's f16 matmuls on the mma.sync GEMM and on the
        # wgmma one with cp.async tiles (the default: TMA tiles).
        builds += [("unfused " + v, False, GPU_VARIANTS[v])
                   for v in ("mma", "wgmma")]
    for build, fused, flags in builds:
        if fused and flags and flags != tiled:
            flags = flags + tiled
        lib = h.build(name + "_".join([""] + flags).replace("--", "")
                      .replace("=", "_"), source, fused, flags=flags)
        (out,) = h.run(lib, inputs)
        label = "attention %s %s" % (name, build)
        h.expect_close(label, out, ref, tol)
        # Rows that see no key must be exactly zero, never NaN.
        visible = empty_rows(m, causal, b, hq, sq, skv)
        if visible is not None and visible.any():
            h.expect(label + ": rows without a visible key are 0",
                     np.all(out[np.broadcast_to(visible, out.shape[:3])] == 0))


def empty_rows(m, causal, b, hq, sq, skv):
    hidden = np.zeros((b, hq, sq, skv), dtype=bool)
    if m is not None:
        hidden |= np.broadcast_to(np.isneginf(m.astype(np.float64)),
                                  (b, hq, sq, skv))
    if causal:
        i = np.arange(sq)[:, None]
        j = np.arange(skv)[None, :]
        hidden |= ~(j <= i + skv - sq)
    if m is None and not causal:
        return None
    return hidden.all(-1)


def padding_mask(rng, b, hq, sq, skv):
    """[B,1,1,Skv]: the last keys of each batch are padding (-inf)."""
    m = np.zeros((b, 1, 1, skv))
    for i in range(b):
        m[i, ..., skv - 1 - i * 3:] = -np.inf
    return m


def left_padding(rng, b, hq, sq, skv):
    """[B,1,1,Skv]: the first 3 + 5 i keys of batch i are padding (-inf), as
    in a left-padded batch of prompts."""
    m = np.zeros((b, 1, 1, skv))
    for i in range(b):
        m[i, ..., :3 + 5 * i] = -np.inf
    return m


def padding_first_batch_empty(rng, b, hq, sq, skv):
    """[B,1,1,Skv]: batch 0 sees no key at all (-inf everywhere), batch i > 0
    has its last 5 i keys padded."""
    m = np.zeros((b, 1, 1, skv))
    m[0] = -np.inf
    for i in range(1, b):
        m[i, ..., skv - 5 * i:] = -np.inf
    return m


def key_padding_finfo(rng, b, hq, sq, skv):
    """[B,1,1,Skv] padding as frameworks write it (finfo.min), random
    elsewhere; batch 1 masks every key (its rows average every value)."""
    m = rng.uniform(-2, 0, (b, 1, 1, skv))
    m[0, ..., skv - 37:] = np.finfo(np.float32).min
    m[1:, ...] = np.finfo(np.float32).min
    return m


def rows_fully_masked(rng, b, hq, sq, skv):
    """[B,1,Sq,Skv] random additive mask with whole rows at -inf."""
    m = rng.standard_normal((b, 1, sq, skv))
    m[:, :, ::5, :] = -np.inf
    return m


def finfo_min_rows(rng, b, hq, sq, skv):
    """[B,1,Sq,Skv]: padding as frameworks write it, with the most negative
    finite float instead of -inf; whole rows of it average every key."""
    m = rng.standard_normal((b, 1, sq, skv))
    m[:, :, ::4, :] = np.finfo(np.float32).min
    m[:, :, 1::4, skv // 2:] = np.finfo(np.float32).min
    return m


def full_mask(rng, b, hq, sq, skv):
    return rng.standard_normal((b, hq, sq, skv))


def row_mask(rng, b, hq, sq, skv):
    """[Sq, Skv]: rank-2 mask broadcast over batch and heads."""
    return rng.uniform(-3, 0, (sq, skv))


def softmax_case(h, rng, name, shape, dim):
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    ref = reference.softmax(x.astype(np.float64), dim)
    for fused in (True, False):
        (out,) = h.run(h.build(name, mlir.softmax(shape, dim), fused), [x])
        h.expect_close("softmax %s %s" % (name, "fused" if fused else
                                          "unfused"), out, ref, 1e-4)


def layer_norm_case(h, rng, name, shape, eps):
    n = shape[-1]
    x = (rng.standard_normal(shape) * 3 + 1.5).astype(np.float32)
    g = rng.standard_normal(n).astype(np.float32)
    bt = rng.standard_normal(n).astype(np.float32)
    ref = reference.layer_norm(x.astype(np.float64), g, bt,
                               reference.f32(eps))
    for fused in (True, False):
        (out,) = h.run(h.build(name, mlir.layer_norm(shape, eps), fused),
                       [x, g, bt])
        h.expect_close("layer_norm %s %s" % (name, "fused" if fused else
                                             "unfused"), out, ref, 1e-4)


def rms_norm_case(h, rng, name, shape, eps, dtype="f32"):
    """x * rsqrt(mean(x^2) + eps) * gamma. For f16/bf16 the reference rounds
    as the op's definition does (the normalised value to the type, then the
    product with gamma), and all but a few elements must be bit-equal to it:
    only the order of the f32 sum of squares differs."""
    n = shape[-1]
    x = rng.standard_normal(shape) * 3 + 1.5
    g = rng.standard_normal(n)
    if dtype == "f16":
        def to(v):
            return np.asarray(v).astype(np.float16)

        def back(v):
            return v.astype(np.float64)
        roundoff = 2.0**-11
    elif dtype == "bf16":
        def back(v):
            return bf16_to_f32(v).astype(np.float64)
        to, roundoff = f32_to_bf16, 2.0**-8
    else:
        def to(v):
            return np.asarray(v).astype(np.float32)

        def back(v):
            return v.astype(np.float64)
        roundoff = None
    xin, gin = to(x), to(g)
    x64, g64 = back(xin), back(gin)
    y = reference.rms_norm(x64, 1.0, reference.f32(eps))
    if roundoff:
        ref_bits = to(back(to(y)) * g64)
        ref = back(ref_bits)
    else:
        ref = y * g64
    for fused in (True, False):
        label = "rms_norm %s %s" % (name, "fused" if fused else "unfused")
        (out,) = h.run(h.build(name, mlir.rms_norm(shape, eps, dtype),
                               fused), [xin, gin])
        h.expect_close(label, back(out), ref, roundoff or 1e-5)
        if roundoff:
            same = np.mean(out.view(np.uint16) == ref_bits.view(np.uint16))
            h.expect("%s: %.2f%% of elements bit-equal the reference (at "
                     "least 99%%)" % (label, 100 * same), same >= 0.99)


def matmul_case(h, rng, name, batch, m, k, n, weight=False):
    """f32 matmul; with `weight`, B is given as [batch, n, k] and transposed
    for the matmul (tosa.transpose), as imported models do."""
    a = rng.standard_normal((batch, m, k)).astype(np.float32)
    b = rng.standard_normal((batch, n, k) if weight else
                            (batch, k, n)).astype(np.float32)
    inputs = [a, b]
    if weight:
        b = b.transpose(0, 2, 1)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    (out,) = h.run(h.build(name, mlir.matmul(batch, m, k, n, "f32", weight),
                           True), inputs)
    # Element by element against the error bound of an f32 dot product of
    # length k in any summation order, |C - ref| <= k u |A| |B| (u = 2^-24):
    # a norm-wise relative error is ill-posed for a C of one element, whose
    # sum may cancel to near zero.
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    err = np.max(np.abs(out.astype(np.float64) - ref) / scale)
    bound = k * 2.0**-24
    h.expect("matmul %s: max |C - ref| / (|A| |B|) %.2e <= k u = %.2e" %
             (name, err, bound), np.all(np.isfinite(out)) and err <= bound)


def matmul_f16_case(h, rng, name, batch, m, k, n, weight=False):
    """f16 operands, f32 result: the tensor-core GEMM; on nvptx also its
    wgmma builds, with cp.async and with TMA (K and N multiples of 8). With
    `weight`, B is given as [batch, n, k] and transposed for the matmul, as
    imported models multiply by their weights (the kernels read it as
    given)."""
    a = rng.standard_normal((batch, m, k)).astype(np.float16)
    b = rng.standard_normal((batch, n, k) if weight else
                            (batch, k, n)).astype(np.float16)
    ta, tb = tensor_type(a.shape, "f16"), tensor_type(b.shape, "f16")
    tbt = tensor_type((batch, k, n), "f16")
    tc = tensor_type((batch, m, n))
    transpose = ""
    if weight:
        transpose = """  %%et = tensor.empty() : %s
  %%b = linalg.transpose ins(%%w : %s) outs(%%et : %s) permutation = [0, 2, 1]
""" % (tbt, tb, tbt)
    source = """func.func @main(%%a: %s, %%%s: %s) -> %s {
%s  %%e = tensor.empty() : %s
  %%z = arith.constant 0.0 : f32
  %%f = linalg.fill ins(%%z : f32) outs(%%e : %s) -> %s
  %%c = linalg.batch_matmul ins(%%a, %%b : %s, %s) outs(%%f : %s) -> %s
  return %%c : %s
}
""" % (ta, "w" if weight else "b", tb, tc, transpose, tc, tc, tc, ta, tbt,
       tc, tc, tc)
    ref = a.astype(np.float64) @ (b.transpose(0, 2, 1) if weight else
                                  b).astype(np.float64)
    builds = [("", [])]
    if h.target == "nvptx":
        # The default (wgmma on TMA tiles where the shape allows), mma.sync
        # and wgmma on cp.async tiles.
        builds += [(" " + v, GPU_VARIANTS[v]) for v in ("mma", "wgmma")]
    for build, flags in builds:
        lib = h.build(name + "_".join([""] + flags).replace("--", ""),
                      source, True, flags=flags)
        (out,) = h.run(lib, [a, b])
        h.expect_close("matmul %s%s" % (name, build), out, ref, 1e-5)


def matmul_accumulate_case(h, rng, name, batch, m, k, n):
    """C + A @ W^T in f16 throughout (a weight given as [batch, n, k], C an
    input the product is added to, its sum rounded to f16): the GPU
    kernels' C += A.B with an f16 C (the tensor-core GEMV up to 32 rows,
    the mma.sync GEMM beyond), which sum in f32 and round once. (The CPU
    lowering follows linalg's f16 accumulator literally, rounding every
    partial sum: a different computation, not checked here.)"""
    a = rng.standard_normal((batch, m, k)).astype(np.float16)
    w = rng.standard_normal((batch, n, k)).astype(np.float16)
    c = rng.standard_normal((batch, m, n)).astype(np.float16)
    ta, tw = tensor_type(a.shape, "f16"), tensor_type(w.shape, "f16")
    tbt, tc = tensor_type((batch, k, n), "f16"), tensor_type(c.shape, "f16")
    source = """func.func @main(%%a: %s, %%w: %s, %%c: %s) -> %s {
  %%et = tensor.empty() : %s
  %%b = linalg.transpose ins(%%w : %s) outs(%%et : %s) permutation = [0, 2, 1]
  %%r = linalg.batch_matmul ins(%%a, %%b : %s, %s) outs(%%c : %s) -> %s
  return %%r : %s
}
""" % (ta, tw, tc, tc, tbt, tw, tbt, ta, tbt, tc, tc, tc)
    ref = c.astype(np.float64) + a.astype(np.float64) @ \
        w.transpose(0, 2, 1).astype(np.float64)
    (out,) = h.run(h.build(name, source, True), [a, w, c])
    # The f16 result's own rounding: 2^-11 relative, with room for the
    # f32 sums' order.
    h.expect_close("matmul %s" % name, out, ref, 2e-3)


def main():
    h, rng, _ = start(sys.argv[1:])
    A = attention_case
    A(h, rng, "odd_sizes", 1, 12, 12, 77, 200, 80)
    A(h, rng, "decode_split_kv", 1, 12, 12, 1, 1000, 64)
    A(h, rng, "decode_short", 2, 3, 3, 1, 300, 64)
    A(h, rng, "one_head_one_key", 1, 1, 1, 1, 1, 16)
    A(h, rng, "causal_sq_lt_skv", 1, 4, 4, 77, 200, 64, causal=True)
    A(h, rng, "causal_sq_gt_skv", 1, 2, 2, 200, 77, 64, causal=True)
    A(h, rng, "causal_square", 2, 2, 2, 129, 129, 32, causal=True)
    A(h, rng, "causal_long", 1, 2, 2, 600, 600, 64, causal=True)
    A(h, rng, "rising_scores", 1, 2, 2, 50, 1000, 64, key_growth=6.0)
    A(h, rng, "decode_rising_scores", 1, 4, 4, 1, 2000, 64, key_growth=20.0)
    A(h, rng, "gqa_12_4_mask_rows", 1, 12, 4, 33, 65, 64,
      mask=rows_fully_masked)
    A(h, rng, "padding_mask_batch", 3, 4, 2, 17, 40, 64, mask=padding_mask)
    A(h, rng, "left_padding", 3, 2, 2, 40, 300, 64, mask=left_padding)
    A(h, rng, "first_block_spike", 1, 2, 2, 40, 300, 64, key_spike=50)
    A(h, rng, "padding_mask_long", 3, 2, 2, 70, 300, 64, mask=padding_mask,
      key_growth=6.0)
    A(h, rng, "key_padding_finfo", 2, 2, 2, 45, 260, 32,
      mask=key_padding_finfo)
    A(h, rng, "padding_mask_causal", 3, 2, 1, 150, 300, 64,
      mask=padding_mask, causal=True)
    A(h, rng, "decode_split_kv_padding", 3, 4, 4, 1, 1000, 64,
      mask=key_padding_finfo)
    A(h, rng, "decode_gqa_odd_d_empty_row", 3, 8, 2, 1, 700, 80,
      mask=padding_first_batch_empty)
    A(h, rng, "decode_dv_wide", 1, 3, 3, 1, 530, 32, dv=144)
    A(h, rng, "decode_d256_17_keys", 2, 2, 1, 1, 17, 256, causal=True)
    A(h, rng, "few_rows_causal_gqa_masked", 2, 8, 2, 5, 600, 64, causal=True,
      mask=rows_fully_masked)
    A(h, rng, "few_rows_sq_gt_skv_causal", 1, 2, 2, 7, 3, 32, causal=True)
    A(h, rng, "few_rows_finfo_d80", 1, 3, 3, 8, 1000, 80, mask=finfo_min_rows)
    A(h, rng, "few_rows_gqa3_d128", 2, 6, 2, 3, 777, 128, causal=True,
      mask=padding_mask)
    A(h, rng, "few_rows_12_causal_sq_lt_skv", 1, 3, 3, 12, 900, 64,
      causal=True, mask=rows_fully_masked)
    A(h, rng, "finfo_min_rows", 1, 2, 2, 33, 40, 64, mask=finfo_min_rows)
    A(h, rng, "full_mask_scale", 1, 2, 2, 40, 50, 48, mask=full_mask,
      scale=0.3)
    A(h, rng, "rank2_mask_causal_dv", 2, 4, 1, 24, 24, 32, dv=48,
      mask=row_mask, causal=True)
    # Soft caps of 1.5 to 3 on scores growing to several times that (the
    # cap's tanh saturates), and Gemma 2's 50 on scores up to about 100:
    # query blocks, decode (its kernel scores in f32 for every type), f16 on
    # the tensor-core kernels.
    A(h, rng, "softcap_causal_gqa_padding", 2, 4, 2, 40, 90, 64, causal=True,
      mask=padding_mask, softcap=2.0, key_growth=3.0)
    A(h, rng, "softcap_50_scale", 1, 2, 2, 70, 150, 32, scale=0.9,
      softcap=50.0, key_growth=2.0)
    A(h, rng, "decode_softcap_finfo", 2, 8, 2, 1, 300, 64,
      mask=key_padding_finfo, softcap=1.5)
    A(h, rng, "f16_softcap_causal", 1, 4, 2, 40, 70, 64, dtype="f16",
      causal=True, softcap=3.0, key_growth=3.0)
    # Sliding windows: query blocks whose first key tiles lie before their
    # window (skipped) next to padding, without a causal limit, decode over
    # keys that a padding mask hides entirely in one batch element (its row
    # averages over its window only), f16 on the tensor-core kernels.
    A(h, rng, "window_causal_gqa_padding", 2, 4, 2, 100, 100, 32, causal=True,
      mask=padding_mask, window=17)
    A(h, rng, "window_no_causal", 1, 2, 2, 40, 130, 32, window=50)
    A(h, rng, "decode_window_finfo", 2, 4, 1, 1, 700, 64, causal=True,
      mask=key_padding_finfo, window=100)
    A(h, rng, "f16_window_causal", 1, 2, 1, 150, 150, 64, dtype="f16",
      causal=True, window=40)
    A(h, rng, "f16", 1, 4, 2, 19, 37, 64, dtype="f16")
    A(h, rng, "f16_causal_gqa_padding", 2, 8, 2, 70, 130, 64, dtype="f16",
      causal=True, mask=padding_mask)
    A(h, rng, "f16_sq_gt_skv_causal", 1, 2, 2, 100, 40, 32, dtype="f16",
      causal=True)
    A(h, rng, "f16_d128_odd", 1, 2, 2, 45, 97, 128, dtype="f16")
    A(h, rng, "f16_d128_causal_many_tiles", 1, 1, 1, 140, 330, 128,
      dtype="f16", causal=True)
    A(h, rng, "f16_decode_finfo", 2, 4, 4, 1, 300, 64, dtype="f16",
      mask=key_padding_finfo)
    A(h, rng, "f16_decode_gqa8_d128", 2, 16, 2, 1, 1100, 128, dtype="f16")
    A(h, rng, "f16_decode_causal_gqa4_sq2", 1, 8, 2, 2, 777, 64, dtype="f16",
      causal=True, mask=padding_mask)
    A(h, rng, "f16_decode_odd_d", 2, 2, 2, 1, 350, 81, dtype="f16",
      key_growth=10.0)
    A(h, rng, "f16_rising_scores", 1, 2, 2, 64, 500, 64, dtype="f16",
      key_growth=6.0)
    A(h, rng, "f16_masked_rows_dv", 1, 4, 4, 33, 80, 64, dv=32, dtype="f16",
      mask=rows_fully_masked)
    matmul_case(h, rng, "odd_panels", 4, 99, 64, 65)
    matmul_case(h, rng, "one_by_one", 1, 1, 17, 1)
    matmul_case(h, rng, "deep_k_slices", 2, 130, 600, 33)
    matmul_case(h, rng, "bert_ffn", 1, 128, 384, 1536)
    # f16: 2 slices of K (zero-filled past 72) and 2 warpgroups; 5 slices
    # (stages refilled) over 2 column blocks; one slice, N = 40; 9 slices.
    matmul_f16_case(h, rng, "f16_odd", 3, 65, 72, 200)
    matmul_f16_case(h, rng, "f16_deep_k", 1, 130, 320, 136)
    matmul_f16_case(h, rng, "f16_narrow", 1, 33, 16, 40)
    matmul_f16_case(h, rng, "f16_deeper_k_wide", 2, 200, 520, 264)
    # B given as [N, K]: a tail of 72 columns of C past two warpgroups' 128;
    # N = 40 (TMA boxes of 40 rows); 4 slices (stages refilled); K = 18
    # (the mma.sync kernel's 4-byte chunks; no wgmma).
    matmul_f16_case(h, rng, "f16_weight_odd", 2, 65, 72, 200, weight=True)
    matmul_f16_case(h, rng, "f16_weight_narrow", 1, 33, 16, 40, weight=True)
    matmul_f16_case(h, rng, "f16_weight_deep_k", 1, 130, 200, 136,
                    weight=True)
    matmul_f16_case(h, rng, "f16_weight_k18", 1, 17, 18, 34, weight=True)
    # At most 8 rows of A per batch (a decode step's projections): the GPU's
    # GEMV kernels. B as [N, K]: K in 16-byte chunks with a tail (200 = 25
    # chunks, 1000 = 125), 8 rows, N past the last 16-column block; K = 18
    # in 4-byte chunks. B as [K, N]: K past a step of 256 rows, N past the
    # last 16-column block; N = 18 (4-byte chunks); f32 with N = 77 (one
    # element per chunk) and 1 x 17 x 1.
    matmul_f16_case(h, rng, "f16_gemv_weight", 2, 1, 200, 136, weight=True)
    matmul_f16_case(h, rng, "f16_gemv_weight_rows8", 1, 8, 1000, 40,
                    weight=True)
    matmul_f16_case(h, rng, "f16_gemv_weight_k18", 1, 3, 18, 24, weight=True)
    matmul_f16_case(h, rng, "f16_gemv", 1, 3, 520, 200)
    matmul_f16_case(h, rng, "f16_gemv_n18", 2, 5, 34, 18)
    matmul_case(h, rng, "gemv_f32", 2, 4, 300, 77)
    matmul_case(h, rng, "gemv_f32_weight", 1, 2, 130, 70, weight=True)
    # Up to 32 rows on tensor cores, in groups of 8: 20 rows (3 groups, the
    # last one 4 rows short), 32 rows with K = 1000 (125 blocks of 32 k);
    # 33 rows: the tiled kernel.
    matmul_f16_case(h, rng, "f16_gemv_weight_rows20", 2, 20, 264, 72,
                    weight=True)
    matmul_f16_case(h, rng, "f16_gemv_weight_rows32", 1, 32, 1000, 40,
                    weight=True)
    matmul_f16_case(h, rng, "f16_weight_rows33", 1, 33, 64, 40, weight=True)
    if h.target == "nvptx":
        matmul_accumulate_case(h, rng, "f16_gemv_accumulate", 2, 5, 264, 40)
        matmul_accumulate_case(h, rng, "f16_accumulate_tiled", 1, 40, 96, 72)
    softmax_case(h, rng, "softmax_rows", (7, 1000), 1)
    softmax_case(h, rng, "softmax_inner_dim", (3, 5, 77), 1)
    softmax_case(h, rng, "softmax_one", (4, 1), 1)
    layer_norm_case(h, rng, "ln_bert", (5, 384), 1e-12)
    layer_norm_case(h, rng, "ln_odd", (2, 3, 80), 1e-5)
    rms_norm_case(h, rng, "rms_llama", (3, 13, 96), 1e-6)
    rms_norm_case(h, rng, "rms_odd", (2, 3, 77), 1e-5)
    rms_norm_case(h, rng, "rms_f16", (5, 200), 1e-6, "f16")
    rms_norm_case(h, rng, "rms_bf16", (4, 3, 130), 1e-5, "bf16")
    h.finish()


if __name__ == "__main__":
    main()
