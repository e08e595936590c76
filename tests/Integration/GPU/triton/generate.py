"""Writes the Triton kernels that triton-ptx.test runs on the PTX interpreter.

The PTX interpreter (ptx-interpreter/) checks tfc's GPU
kernels on machines without a GPU, and it reads the PTX ISA the way tfc's
kernel builders do. Kernels that another compiler wrote, for the same
instructions, check that reading independently: Triton's PTX runs on GPUs
every day, so where the interpreter computes what it should (run.py checks
every output against float64), the interpreter's mma.sync, ldmatrix and
stmatrix fragments, wgmma's descriptors and swizzles, TMA boxes and
mbarriers, setmaxnreg and named barriers agree with the hardware's.

This script needs Triton (no GPU: it compiles for a target):

  python3 -m venv /tmp/triton-venv
  /tmp/triton-venv/bin/pip install triton==3.5.1
  TRITON_DISABLE_LINE_INFO=1 /tmp/triton-venv/bin/python \\
      tests/Integration/GPU/triton/generate.py

and writes kernels/NAME.ptx.gz and kernels/kernels.json (what run.py
needs to launch each: entry, threads, shared memory, tensor descriptors).
The kernels are the usual tiled matmul and flash attention, written to
cover what the interpreter implements: sm_80 (mma.sync, ldmatrix,
cp.async) and sm_90 (wgmma with each swizzle, A from registers or shared
memory, B K- or MN-major, one or two warpgroups; stmatrix; TMA loads and
stores with mbarriers; Triton's warp specialisation).

With --mix --out DIR it writes instead the kernels that
bench/gpu/triton_mix.py counts: the flash attention tutorial's forward pass
and the matmul tutorial's configurations (run.py --kernels DIR runs them).
"""
import argparse
import gzip
import json
import os

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget

HERE = os.path.dirname(os.path.abspath(__file__))


@triton.jit
def matmul(a, b, c, M, N, K, sbk, sbn, BM: tl.constexpr, BN: tl.constexpr,
           BK: tl.constexpr, MASKED: tl.constexpr):
    # C[M, N] (f32) = A[M, K] (row-major) . B, B's element (k, n) at
    # b + k * sbk + n * sbn.
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        pa = a + rm[:, None] * K + (k + rk)[None, :]
        pb = b + (k + rk)[:, None] * sbk + rn[None, :] * sbn
        if MASKED:
            x = tl.load(pa, mask=(rm[:, None] < M) & ((k + rk)[None, :] < K),
                        other=0.0)
            y = tl.load(pb, mask=((k + rk)[:, None] < K) & (rn[None, :] < N),
                        other=0.0)
        else:
            x = tl.load(pa)
            y = tl.load(pb)
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def matmul_tma(a_desc, b_desc, c, M, N, K, BM: tl.constexpr,
               BN: tl.constexpr, BK: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(a_desc.load([pm * BM, k]), b_desc.load([k, pn * BN]))
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    tl.store(c + rm[:, None] * N + rn[None, :], acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _start(S, pm, BM: tl.constexpr, D: tl.constexpr, CAUSAL: tl.constexpr):
    # The online softmax's initial max, sum and output for BM rows, and the
    # end of the keys block pm visits.
    hi = S
    if CAUSAL:
        hi = tl.minimum(S, (pm + 1) * BM)
    return (tl.full((BM,), -float("inf"), tl.float32),
            tl.zeros((BM,), tl.float32), tl.zeros((BM, D), tl.float32), hi)


@triton.jit
def _softmax_step(s, rm, rn, S, m_i, l_i, acc, CAUSAL: tl.constexpr):
    # One tile of scores s (rows rm, keys rn) into the online softmax:
    # keys past S and, causal, past the row hidden; returns the
    # probabilities, the new max and sum, the rescaled output.
    valid = rn[None, :] < S
    if CAUSAL:
        valid = valid & (rn[None, :] <= rm[:, None])
    s = tl.where(valid, s, -float("inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    p = tl.exp(s - m_new[:, None])
    alpha = tl.exp(m_i - m_new)
    return p, m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None]


@triton.jit
def attention(q, k, v, o, S, scale, CAUSAL: tl.constexpr, BM: tl.constexpr,
              BN: tl.constexpr, D: tl.constexpr):
    # q, k, v, o: [BH, S, D]; a block per (query tile, batch x head).
    pm = tl.program_id(0)
    base = tl.program_id(1) * S * D
    rm = pm * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    qt = tl.load(q + base + rm[:, None] * D + rd[None, :],
                 mask=rm[:, None] < S, other=0.0)
    m_i, l_i, acc, hi = _start(S, pm, BM, D, CAUSAL)
    for start in range(0, hi, BN):
        rn = start + tl.arange(0, BN)
        kt = tl.load(k + base + rn[None, :] * D + rd[:, None],
                     mask=rn[None, :] < S, other=0.0)
        p, m_i, l_i, acc = _softmax_step(tl.dot(qt, kt) * scale, rm, rn, S,
                                         m_i, l_i, acc, CAUSAL)
        vt = tl.load(v + base + rn[:, None] * D + rd[None, :],
                     mask=rn[:, None] < S, other=0.0)
        acc += tl.dot(p.to(vt.dtype), vt)
    tl.store(o + base + rm[:, None] * D + rd[None, :],
             (acc / l_i[:, None]).to(o.dtype.element_ty),
             mask=rm[:, None] < S)


@triton.jit
def attention_tma(q_desc, k_desc, v_desc, o_desc, S, scale,
                  CAUSAL: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                  D: tl.constexpr, WS: tl.constexpr):
    # The descriptors are of [BH, S, D] with boxes of [1, BM or BN, D]:
    # keys and rows past S are TMA's zero fill, stores past S are dropped.
    pm = tl.program_id(0)
    bh = tl.program_id(1)
    qt = q_desc.load([bh, pm * BM, 0]).reshape(BM, D)
    rm = pm * BM + tl.arange(0, BM)
    m_i, l_i, acc, hi = _start(S, pm, BM, D, CAUSAL)
    for start in tl.range(0, hi, BN, warp_specialize=WS):
        kt = k_desc.load([bh, start, 0]).reshape(BN, D)
        rn = start + tl.arange(0, BN)
        p, m_i, l_i, acc = _softmax_step(tl.dot(qt, kt.T) * scale, rm, rn, S,
                                         m_i, l_i, acc, CAUSAL)
        vt = v_desc.load([bh, start, 0]).reshape(BN, D)
        acc += tl.dot(p.to(vt.dtype), vt)
    out = (acc / l_i[:, None]).to(o_desc.dtype)
    o_desc.store([bh, pm * BM, 0], out.reshape(1, BM, D))


@triton.jit
def _tutorial_inner(acc, l_i, m_i, q, k_desc, v_desc, bh, pm, qk_scale,
                    offs_m, BM: tl.constexpr, BN: tl.constexpr,
                    D: tl.constexpr, STAGE: tl.constexpr, S,
                    WS: tl.constexpr):
    # Triton's tutorial 06 (fused attention), _attn_fwd_inner: stage 1 the
    # tiles before the diagonal block (no mask), 2 the diagonal block, 3
    # every tile (not causal). Scale folded into exp2.
    if STAGE == 1:
        lo, hi = 0, pm * BM
    elif STAGE == 2:
        lo, hi = pm * BM, (pm + 1) * BM
    else:
        lo, hi = 0, S
    offs_n = tl.arange(0, BN)
    for start in tl.range(lo, hi, BN, warp_specialize=WS):
        k = k_desc.load([bh, start, 0]).reshape(BN, D)
        qk = tl.dot(q, k.T)
        if STAGE == 2:
            mask = offs_m[:, None] >= (start + offs_n[None, :])
            qk = qk * qk_scale + tl.where(mask, 0, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk -= m_ij[:, None]
        else:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_ij = tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = v_desc.load([bh, start, 0]).reshape(BN, D)
        acc = tl.dot(p.to(tl.float16), v, acc)
        l_i = l_i * alpha + l_ij
        m_i = m_ij
    return acc, l_i, m_i


@triton.jit
def attention_tutorial(q_desc, k_desc, v_desc, o_desc, S, scale,
                       CAUSAL: tl.constexpr, BM: tl.constexpr,
                       BN: tl.constexpr, D: tl.constexpr, WS: tl.constexpr):
    # The tutorial's _attn_fwd on TMA descriptors of [BH, S, D], f16, for
    # S a multiple of BM (no bounds checks, as the tutorial).
    pm = tl.program_id(0)
    bh = tl.program_id(1)
    offs_m = pm * BM + tl.arange(0, BM)
    m_i = tl.full((BM,), -float("inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32) + 1.0
    acc = tl.zeros((BM, D), tl.float32)
    qk_scale = scale * 1.44269504
    q = q_desc.load([bh, pm * BM, 0]).reshape(BM, D)
    if CAUSAL:
        acc, l_i, m_i = _tutorial_inner(acc, l_i, m_i, q, k_desc, v_desc, bh,
                                        pm, qk_scale, offs_m, BM, BN, D, 1,
                                        S, WS)
        acc, l_i, m_i = _tutorial_inner(acc, l_i, m_i, q, k_desc, v_desc, bh,
                                        pm, qk_scale, offs_m, BM, BN, D, 2,
                                        S, WS)
    else:
        acc, l_i, m_i = _tutorial_inner(acc, l_i, m_i, q, k_desc, v_desc, bh,
                                        pm, qk_scale, offs_m, BM, BN, D, 3,
                                        S, WS)
    out = (acc / l_i[:, None]).to(o_desc.dtype)
    o_desc.store([bh, pm * BM, 0], out.reshape(1, BM, D))


TYPES = {"f16": "fp16", "bf16": "bf16"}


def compile_kernel(fn, signature, constants, arch, warps, stages):
    sig = dict(signature)
    sig.update({name: "constexpr" for name in constants})
    src = triton.compiler.ASTSource(fn=fn, signature=sig,
                                    constexprs=constants)
    return triton.compile(src, target=GPUTarget("cuda", arch, 32),
                          options={"num_warps": warps,
                                   "num_stages": stages})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "kernels"))
    ap.add_argument("--mix", action="store_true",
                    help="the tutorial's attention in Hopper configurations "
                    "(bench/gpu/triton_mix.py) instead of the test's kernels")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    cases = []

    def add(name, kernel, compiled, **info):
        meta = compiled.metadata
        info.update(name=name, kernel=kernel, entry=meta.name,
                    threads=32 * meta.num_warps, shared=meta.shared,
                    descriptors=[dict(m) for m in
                                 (meta.tensordesc_meta or [])])
        cases.append(info)
        with gzip.GzipFile(os.path.join(a.out, name + ".ptx.gz"), "wb",
                           mtime=0) as f:
            f.write(compiled.asm["ptx"].encode())

    (mix_kernels if a.mix else test_kernels)(add)
    with open(os.path.join(a.out, "kernels.json"), "w") as f:
        json.dump({"triton": triton.__version__, "kernels": cases}, f,
                  indent=1)
        f.write("\n")
    print("%d kernels, Triton %s" % (len(cases), triton.__version__))


def tutorial(add, d, causal, bm, bn, warps, stages, ws):
    desc = "tensordesc<fp16[1, %d, %d]>"
    k = compile_kernel(attention_tutorial,
                       {"q_desc": desc % (bm, d), "k_desc": desc % (bn, d),
                        "v_desc": desc % (bn, d), "o_desc": desc % (bm, d),
                        "S": "i32", "scale": "fp32"},
                       {"CAUSAL": causal, "BM": bm, "BN": bn, "D": d,
                        "WS": ws}, 90, warps, stages)
    add("tutorial_sm90_f16_d%d%s_%dx%d_w%d_s%d%s" % (
        d, "_causal" if causal else "", bm, bn, warps, stages,
        "_ws" if ws else ""), "attention_tma", k, dtype="f16", D=d,
        causal=causal, BM=bm, full_tiles=True)


def gemm(add, name, arch, dt, bm, bn, bk, warps, stages, bt=False,
         masked=True, **info):
    """The pointer matmul (f32 C) in one configuration."""
    sig = {"a": "*" + TYPES[dt], "b": "*" + TYPES[dt], "c": "*fp32",
           "M": "i32", "N": "i32", "K": "i32", "sbk": "i32", "sbn": "i32"}
    k = compile_kernel(matmul, sig, {"BM": bm, "BN": bn, "BK": bk,
                                     "MASKED": masked}, arch, warps, stages)
    add(name, "matmul", k, dtype=dt, BM=bm, BN=bn, BK=bk, transposed_b=bt,
        masked=masked, **info)


def gemm_tma(add, name, bm, bn, bk, warps, stages, **info):
    """The TMA matmul (f16, f32 C) in one configuration."""
    desc = "tensordesc<fp16[%d, %d]>"
    k = compile_kernel(
        matmul_tma, {"a_desc": desc % (bm, bk), "b_desc": desc % (bk, bn),
                     "c": "*fp32", "M": "i32", "N": "i32", "K": "i32"},
        {"BM": bm, "BN": bn, "BK": bk}, 90, warps, stages)
    add(name, "matmul_tma", k, dtype="f16", BM=bm, BN=bn, BK=bk, **info)


def mix_kernels(add):
    """The tutorial's attention for D = 64 and 128, causal and not, in the
    configurations of its Hopper autotuning list that Triton 3.5.1 builds:
    blocks of 128 query rows, 64 or 128 keys per tile, 4 or 8 warps, 2 or
    3 stages, with and without warp specialisation. Then f16 matmuls of
    512^3 (f32 C) in the matmul tutorial's configurations for sm_80
    (mma.sync) and sm_90 (wgmma), and on TMA."""
    for arch, bm, bn, bk, warps, stages in [(80, 128, 128, 32, 4, 4),
                                            (80, 128, 256, 64, 8, 3),
                                            (90, 128, 128, 64, 4, 4),
                                            (90, 128, 256, 64, 8, 3)]:
        gemm(add, "gemm_sm%d_%dx%dx%d_w%d_s%d" % (arch, bm, bn, bk, warps,
                                                   stages),
             arch, "f16", bm, bn, bk, warps, stages, masked=False,
             shape=[512, 512, 512])
    for bm, bn, bk, warps, stages in [(128, 128, 64, 4, 4),
                                      (128, 256, 64, 8, 3)]:
        gemm_tma(add, "gemm_tma_sm90_%dx%dx%d_w%d_s%d" % (bm, bn, bk, warps,
                                                           stages),
                 bm, bn, bk, warps, stages, shape=[512, 512, 512])
    for d in (64, 128):
        for causal in (False, True):
            for bn, warps, stages, ws in [(128, 4, 2, False),
                                          (128, 8, 2, False),
                                          (64, 4, 3, False),
                                          (64, 8, 3, False),
                                          (64, 8, 2, True),
                                          (128, 8, 2, True)]:
                try:
                    tutorial(add, d, causal, 128, bn, warps, stages, ws)
                except Exception as e:  # a configuration Triton rejects
                    print("not built: D %d causal %s BN %d, %d warps, %d "
                          "stages, ws %s: %s" % (d, causal, bn, warps, stages,
                                                 ws, str(e).splitlines()[-1]))


def test_kernels(add):
    # (arch, type, BM, BN, BK, warps, B given transposed, masked)
    for arch, dt, bm, bn, bk, warps, bt, masked in [
            (80, "f16", 64, 64, 32, 4, False, True),
            (80, "bf16", 64, 64, 64, 4, True, True),
            (90, "f16", 64, 64, 16, 4, False, True),   # 32-byte swizzle
            (90, "f16", 64, 64, 32, 4, True, True),    # 64-byte swizzle
            (90, "bf16", 64, 64, 64, 4, False, True),  # 128-byte swizzle
            (90, "f16", 64, 64, 32, 4, False, False),  # B MN-major
            (90, "bf16", 128, 128, 64, 8, False, True)]:  # 2 warpgroups
        gemm(add, "matmul_sm%d_%s_%dx%dx%d%s%s" % (
            arch, dt, bm, bn, bk, "_bt" if bt else "",
            "" if masked else "_even"), arch, dt, bm, bn, bk, warps, 3, bt,
            masked)
    gemm_tma(add, "matmul_tma_sm90_f16", 64, 64, 64, 4, 3)

    at_sig = {"q": None, "k": None, "v": None, "o": None, "S": "i32",
              "scale": "fp32"}
    for arch, dt, d, causal in [(80, "f16", 64, True), (80, "bf16", 128, False),
                                (90, "f16", 64, False),
                                (90, "bf16", 128, True)]:
        t = "*" + TYPES[dt]
        k = compile_kernel(attention, dict(at_sig, q=t, k=t, v=t, o=t),
                           {"CAUSAL": causal, "BM": 64, "BN": 64, "D": d},
                           arch, 4, 2)
        add("attention_sm%d_%s_d%d%s" % (arch, dt, d,
                                         "_causal" if causal else ""),
            "attention", k, dtype=dt, D=d, causal=causal, BM=64)

    for d, causal, ws in [(128, True, False), (64, True, True)]:
        t = "tensordesc<fp16[1, 64, %d]>" % d
        k = compile_kernel(attention_tma,
                           {"q_desc": t, "k_desc": t, "v_desc": t,
                            "o_desc": t, "S": "i32", "scale": "fp32"},
                           {"CAUSAL": causal, "BM": 64, "BN": 64, "D": d,
                            "WS": ws}, 90, 4, 2)
        add("attention_tma_sm90_f16_d%d%s%s" % (
            d, "_causal" if causal else "", "_ws" if ws else ""),
            "attention_tma", k, dtype="f16", D=d, causal=causal, BM=64)
    # Two warpgroups on tiles of 128 x 128 (m64n128k16), 160 KiB of stages.
    tutorial(add, 64, True, 128, 128, 8, 2, False)


if __name__ == "__main__":
    main()
