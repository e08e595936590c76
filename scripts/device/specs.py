"""What the device check compiles: every model, its MLIR, its inputs (shape,
dtype and how to draw them) and the reference it is checked against.

Standard library only: prepare.py imports this on the build machine, where
there is no PyTorch. Each model is a plain dict that goes into the manifest
as it is (prepare.py adds the paths of the compiled builds):

  name        unique, also the file name of its builds
  group       "numerics", "timing" (prefill attention), "gemm_timing" or
              "decode_timing"
  mlir        the source (written to .device/src/NAME.mlir)
  entry       function to compile (None: the only public one)
  builds      which builds to compile: "fused" (default pipeline),
              "unfused" (--no-fusion), the GPU_VARIANTS and DECODE_BUILDS
              (tests/pylib/tfc_testing/gpu_builds.py)
  inputs      [{name, shape, dtype, gen}], in call order; gen says how
              check.py draws it: {"kind": "normal", "scale": s, "shift": m}
              (m + s * N(0, 1)), "padding_mask" (additive [B,1,1,Skv], the
              last 3*b+1 keys of batch b at -inf) or "keep_mask" (BERT's
              0/1 attention mask, the last 3*b+2 positions of batch b 0)
  output      {shape, dtype}
  ref         {"op": ..., parameters}: the float64 reference
              (numerics.REFERENCES)
  tol         {build: bound on ||out - ref|| / ||ref||} (TOL below)

Timing models also carry B, H, S, D and causal: check.py times them against
PyTorch's flash SDPA on the same inputs, and checks their outputs against
SDPA's rather than against a float64 reference. Decode timing models carry
B, H (query heads), Hkv, Skv and D, and are timed and checked against
PyTorch's SDPA with grouped-query heads (enable_gqa).
"""

import math

from tfc_testing import attention as attention_mlir
from tfc_testing import mlir
from tfc_testing.gpu_builds import DECODE_BUILDS, GPU_VARIANTS

# Bounds on ||out - ref|| / ||ref|| against a float64 reference, by element
# type: 1e-5 for f32 and 2e-3 for f16 (the issue's bounds). Both builds are
# held to them: the unfused build computes f16/bf16 graphs as frameworks do
# (matmuls accumulate in f32, softmax and the norms in f32).
#
# bf16 cannot meet a plain 2e-3: rounding the exact output to bf16 alone
# costs about 1.7e-3 on these inputs (2^-9 unit roundoff), measured per case
# as the "rounding floor". A bf16 result must stay within 2e-3 of that floor
# (BF16_MARGIN); check.py prints the floor next to every error.
TOL = {"f32": 1e-5, "f16": 2e-3, "bf16": None}
BF16_MARGIN = 2e-3


def tol(dtype):
    return dict({"fused": TOL[dtype], "unfused": TOL[dtype]},
                **{b: TOL[dtype] for b in list(GPU_VARIANTS) +
                   list(DECODE_BUILDS)})


def bound(tol, dtype, floor):
    """The error bound of one check: bf16 is measured from its floor."""
    return floor + BF16_MARGIN if dtype == "bf16" else tol


def bounds(tol, dtype, floors):
    """The bounds of accuracy.verdict (norm-wise, worst row, largest
    absolute error / max|ref|) from the rounding floors
    (accuracy.rounding_floor): `tol` each; bf16 its floor + margin, the
    worst row and the largest element two roundings + margin: a row that
    one key dominates carries the rounding of its probability (P·V takes P
    in the compute type, as frameworks do) along the whole row, on top of
    the output's, and rms_norm rounds its normalised rows before gamma (its
    definition); an element whose exact value lies near a rounding
    boundary may round either way after the first, one unit of its last
    place from the float64 value where the floor has half of one."""
    rel, row, absolute = floors
    return (bound(tol, dtype, rel), bound(tol, dtype, 2 * row),
            bound(tol, dtype, 2 * absolute))


def normal(scale=1.0, shift=0.0):
    return {"kind": "normal", "scale": scale, "shift": shift}


def tensor(name, shape, dtype, gen=None):
    return {"name": name, "shape": list(shape), "dtype": dtype,
            "gen": gen or normal()}


def adversarial(case, role):
    """An input drawn as accuracy.draw's `case` for `role` (q, k, v, a,
    b)."""
    return {"kind": "adversarial", "case": case, "role": role}


def attention(name, b, hq, hkv, sq, skv, d, dtype="f32", causal=False,
              mask=False, scale=None, group="numerics",
              builds=("fused", "unfused"), variants=True, case=None):
    """One transformer.attention; mask=True adds a [B,1,1,Skv] padding mask.
    f16/bf16 ones also get the GPU_VARIANTS builds unless variants=False.
    `case`: q, k and v drawn as accuracy.draw's adversarial case."""
    builds = list(builds)
    if dtype != "f32" and variants:
        for i, variant in enumerate(GPU_VARIANTS):
            if variant not in builds:
                builds.insert(1 + i, variant)
    inputs = [tensor(r, shape, dtype, adversarial(case, r) if case else None)
              for r, shape in (("q", (b, hq, sq, d)), ("k", (b, hkv, skv, d)),
                               ("v", (b, hkv, skv, d)))]
    if mask:
        inputs.append(tensor("mask", (b, 1, 1, skv), dtype,
                             {"kind": "padding_mask"}))
    source = attention_mlir.function(
        b, hq, hkv, sq, skv, d, dtype=dtype,
        mask=(b, 1, 1, skv) if mask else None, causal=causal, scale=scale)
    return {"name": name, "group": group, "mlir": source, "entry": None,
            "builds": list(builds), "dtype": dtype, "inputs": inputs,
            "output": {"shape": [b, hq, sq, d], "dtype": dtype},
            "ref": {"op": "attention", "causal": causal,
                    "scale": scale if scale is not None else 1 / math.sqrt(d)},
            "tol": tol(dtype),
            "B": b, "H": hq, "Hkv": hkv, "Sq": sq, "Skv": skv, "D": d,
            "causal": causal,
            # The default build takes the decode kernel: the GPU_VARIANTS
            # (tiled-kernel variants) then build without it.
            "decode_shape": hq // hkv * sq <= 8}


def one_op(name, source, dtype, inputs, shape, ref):
    """A model of one op, built fused and unfused, its output `shape` in
    `dtype`."""
    return {"name": name, "group": "numerics", "mlir": source, "entry": None,
            "builds": ["fused", "unfused"], "dtype": dtype, "inputs": inputs,
            "output": {"shape": list(shape), "dtype": dtype}, "ref": ref,
            "tol": tol(dtype)}


def softmax(name, shape, dim, dtype="f32"):
    return one_op(name, mlir.softmax(shape, dim, dtype), dtype,
                  [tensor("x", shape, dtype, normal(4.0))], shape,
                  {"op": "softmax", "dim": dim})


def layer_norm(name, shape, eps, dtype="f32"):
    n = shape[-1]
    # eps as the f32 attribute holds it
    return one_op(name, mlir.layer_norm(shape, eps, dtype), dtype,
                  [tensor("x", shape, dtype, normal(3.0, 1.5)),
                   tensor("gamma", (n,), dtype, normal(0.5, 1.0)),
                   tensor("beta", (n,), dtype, normal(0.5))], shape,
                  {"op": "layer_norm", "eps": eps})


def rms_norm(name, shape, eps, dtype="f32"):
    n = shape[-1]
    return one_op(name, mlir.rms_norm(shape, eps, dtype), dtype,
                  [tensor("x", shape, dtype, normal(3.0, 1.5)),
                   tensor("gamma", (n,), dtype, normal(0.5, 1.0))], shape,
                  {"op": "rms_norm", "eps": eps})


def matmul(name, batch, m, k, n, dtype="f32", weight=False, case=None):
    """A matmul with f32 results; f16/bf16 operands run on tensor cores on
    the GPU (accumulated in f32): the default build's wgmma GEMM on TMA
    tiles, "wgmma" (cp.async tiles) and "mma" (the mma.sync GEMM). With
    `weight`, B is given as
    [batch, n, k] and transposed for the matmul, as imported models
    multiply by their weights (the kernels read it as given). `case`: A
    and B drawn as accuracy.draw's adversarial case."""
    bshape = (batch, n, k) if weight else (batch, k, n)
    # No transformer op in it: the fused and unfused builds are the same.
    # f16/bf16 also on the mma.sync GEMM and the wgmma one on cp.async
    # tiles, except at few rows of A, where every build runs the GEMV kernel
    # (up to 32 of a weight [N, K], 8 otherwise).
    gemv = m <= (32 if weight and dtype != "f32" and k % 8 == 0 else 8)
    builds = ["fused"] + (["mma", "wgmma"] if dtype != "f32" and not gemv
                          else [])
    return {"name": name, "group": "numerics",
            "mlir": mlir.matmul(batch, m, k, n, dtype, weight),
            "entry": None, "builds": builds, "dtype": "f32", "weight": weight,
            "inputs": [tensor(r, shape, dtype,
                              adversarial(case, r) if case else None)
                       for r, shape in (("a", (batch, m, k)), ("b", bshape))],
            "output": {"shape": [batch, m, n], "dtype": "f32"},
            "ref": {"op": "matmul", "weight": weight}, "tol": tol("f32")}


def example_gen(name, shape):
    """Realistic magnitudes: weights N(0, 1/fan_in), LayerNorm gamma near 1."""
    if name == "attention_mask":
        return {"kind": "keep_mask"}
    if name.startswith("w"):
        return normal(1 / math.sqrt(shape[0]))
    if name.endswith("gamma"):
        return normal(0.1, 1.0)
    if name.startswith("b") or name.endswith("beta"):
        return normal(0.1)
    return normal()


def example(name, path, op):
    """An exported layer (examples/*/): every argument is an input."""
    with open(path) as f:
        source = f.read()
    entry, args, (shape, dtype) = mlir.signatures(source)[0]
    inputs = [tensor(arg, s, t, example_gen(arg, s)) for arg, s, t in args]
    return {"name": name, "group": "numerics", "mlir": source,
            "entry": entry, "builds": ["fused", "unfused"],
            "dtype": dtype, "inputs": inputs,
            "output": {"shape": shape, "dtype": dtype},
            "ref": {"op": op}, "tol": tol(dtype)}


def numerics_models(root):
    A = attention
    models = []
    for dt in ("f32", "f16", "bf16"):
        models.append(A("attn_%s" % dt, 2, 4, 4, 256, 256, 64, dt))
    models += [
        A("attn_causal_f16", 2, 4, 4, 300, 300, 64, "f16", causal=True),
        A("attn_causal_bf16", 2, 4, 4, 300, 300, 64, "bf16", causal=True),
        A("attn_causal_sq77_skv200_f32", 1, 4, 4, 77, 200, 64, "f32",
          causal=True),
        A("attn_gqa12x4_f16", 2, 12, 4, 128, 128, 64, "f16"),
        A("attn_gqa12x4_causal_f32", 1, 12, 4, 96, 96, 64, "f32",
          causal=True),
        A("attn_odd_77x200_d80_f32", 1, 12, 12, 77, 200, 80, "f32"),
        A("attn_odd_77x200_d80_f16", 1, 12, 12, 77, 200, 80, "f16"),
        A("attn_decode_1x1000_f32", 1, 12, 12, 1, 1000, 64, "f32"),
        A("attn_decode_1x1000_f16", 2, 12, 12, 1, 1000, 64, "f16"),
        # 8 query heads per KV head (the most rows the decode kernel
        # takes), 1100 keys (not a whole number of its 32-key tiles): the
        # decode kernel (and its tunings), the tiled one on the same shape,
        # the unfused graph.
        A("attn_decode_gqa16x2_f16", 2, 16, 2, 1, 1100, 128, "f16",
          builds=("fused",) + tuple(DECODE_BUILDS) + ("unfused",),
          variants=False),
        A("attn_padmask_f32", 3, 4, 4, 40, 40, 64, "f32", mask=True),
        A("attn_padmask_f16", 3, 4, 4, 130, 130, 64, "f16", mask=True,
          scale=0.1),
        softmax("softmax_7x1000_f32", (7, 1000), 1),
        softmax("softmax_3x5x77_dim1_f32", (3, 5, 77), 1),
        softmax("softmax_64x4096_f16", (64, 4096), 1, "f16"),
        layer_norm("layer_norm_512x384_f32", (512, 384), 1e-12),
        layer_norm("layer_norm_2x3x80_f32", (2, 3, 80), 1e-5),
        layer_norm("layer_norm_256x1024_f16", (256, 1024), 1e-5, "f16"),
        rms_norm("rms_norm_2x3x77_f32", (2, 3, 77), 1e-6),
        rms_norm("rms_norm_128x4096_f16", (128, 4096), 1e-5, "f16"),
        rms_norm("rms_norm_64x1000_bf16", (64, 1000), 1e-6, "bf16"),
        matmul("matmul_4x99x64x65", 4, 99, 64, 65),
        matmul("matmul_128x384x1536", 1, 128, 384, 1536),
        matmul("matmul_f16_3x65x48x42", 3, 65, 48, 42, "f16"),
        matmul("matmul_bf16_2x130x200x64", 2, 130, 200, 64, "bf16"),
        # Few rows of A: the GEMV kernels (a weight [N, K] in bf16 on
        # tensor cores, K past the last 32-k block; f16 as [K, N] and f32
        # weights on CUDA cores).
        matmul("matmul_bf16_gemv_2x3x1000x72_weight", 2, 3, 1000, 72, "bf16",
               weight=True),
        matmul("matmul_f16_gemv_1x8x520x200", 1, 8, 520, 200, "f16"),
        matmul("matmul_gemv_1x1x300x77_weight", 1, 1, 300, 77, weight=True),
        # Adversarial inputs (accuracy.py): scores rising along the keys
        # (the online softmax rescales at every block of keys), single
        # spikes, |x| ~ 30; the timed shapes get them too.
        A("attn_rising_causal_f16", 2, 4, 4, 300, 300, 64, "f16",
          causal=True, case="rising"),
        A("attn_spike_f16", 2, 4, 4, 256, 256, 64, "f16", case="spike",
          variants=False),
        A("attn_large_bf16", 2, 4, 4, 256, 256, 64, "bf16", case="large",
          variants=False),
        A("attn_decode_rising_gqa16x2_f16", 2, 16, 2, 1, 1100, 128, "f16",
          builds=("fused",) + tuple(DECODE_BUILDS) + ("unfused",),
          variants=False, case="rising"),
        A("attn_decode_spike_gqa16x2_f16", 2, 16, 2, 1, 1100, 128, "f16",
          builds=("fused",) + tuple(DECODE_BUILDS) + ("unfused",),
          variants=False, case="spike"),
        matmul("matmul_f16_spike_2x130x200x64", 2, 130, 200, 64, "f16",
               case="spike"),
        matmul("matmul_bf16_large_gemv_2x3x1000x72_weight", 2, 3, 1000, 72,
               "bf16", weight=True, case="large"),
        example("bert_layer", root + "/examples/bert-layer/bert_layer.mlir",
                "bert_layer"),
        example("gpt_layer", root + "/examples/gpt-layer/gpt_layer.mlir",
                "gpt_layer"),
    ]
    return models


# The unfused f16 build materialises the [B, H, S, S] scores (and the
# probabilities) in f16: at B=4, H=16, S=16384 that is 17.2e9 elements,
# 34 GB per tensor, several of them live at once: more than the card holds.
UNFUSED_MAX_S = 4096
# The sequence length the attention targets are set at (at least 50% of
# SDPA's throughput, then parity, then past it; 4x the unfused build).
TARGET_S = 4096
UNFUSED_NOTE = ("unfused omitted at S=16384: its [B,H,S,S] f16 score matrix "
                "alone is 4*16*16384^2 = 17.2e9 elements (34 GB), and the "
                "exp/probability tensors are as large again")


def gemm_timing_models(small=False):
    """f16 GEMMs with f32 results, in the default build (wgmma on TMA
    tiles), the mma.sync one and the wgmma one on cp.async tiles (the dry
    run: small shapes, the CPU build only), timed against
    torch.matmul: a square one, and a transformer MLP's up-projection
    (batch 8 x 1024 tokens, 768 -> 3072). Then decode steps' projections
    (the GEMV kernel): one token by a 4096 x 4096 weight as stored ([N,
    K]: the tensor-core GEMV) and as [K, N] (CUDA cores), 4 tokens by an
    MLP's 4096 -> 14336 weight, and 32 (a batch of sequences) by the
    4096 x 4096 one."""
    shapes = ([(1, 128, 96, 256, False), (1, 1, 256, 320, True)] if small
              else [(1, 4096, 4096, 4096, False), (1, 8192, 768, 3072, False),
                    (1, 1, 4096, 4096, True), (1, 1, 4096, 4096, False),
                    (1, 4, 4096, 14336, True), (1, 32, 4096, 4096, True)])
    models = []
    for batch, m, k, n, weight in shapes:
        g = matmul("gemm_%dx%dx%d%s" % (m, k, n, "_weight" if weight else ""),
                   batch, m, k, n, "f16", weight)
        # Against the f32 product of the f16 inputs: f32 sums of up to 4096
        # products in another order, about sqrt(K) * 2^-24 = 4e-6 apart;
        # 1e-4 leaves room for the order of the tensor cores' additions.
        g.update(group="gemm_timing", M=m, K=k, N=n, batch=batch,
                 tol={b: 1e-4 for b in g["builds"]})
        models.append(g)
    return models


def timing_models(small=False):
    """Fused attention B=4, H=16, f16 (in every variant build) and bf16
    (the default build), D in {64, 128}, S in {4096, 16384}, causal and not
    (the dry run: B=1, H=2, small S)."""
    if small:
        b, h, dims, lengths, unfused_max = 1, 2, (64,), (128, 256), 256
    else:
        b, h, dims, lengths, unfused_max = 4, 16, (64, 128), \
            (4096, 16384), UNFUSED_MAX_S
    models = []
    for dtype in ("f16", "bf16"):
        for d in dims:
            for causal in (False, True):
                for s in lengths:
                    name = "time_%s_d%d_s%d%s" % (
                        dtype, d, s, "_causal" if causal else "")
                    builds = ["fused"] + (["unfused"] if s <= unfused_max
                                          else [])
                    m = attention(name, b, h, h, s, s, d, dtype,
                                  causal=causal, group="timing",
                                  builds=builds, variants=dtype == "f16")
                    m["S"] = s
                    if s > unfused_max:
                        m["unfused_note"] = UNFUSED_NOTE
                    models.append(m)
    return models


def decode_timing_models(small=False):
    """f16 decode attention (Sq = 1), D = 128, in the decode kernel
    ("fused") and the tiled kernels ("tiled"), timed against PyTorch's SDPA
    with grouped-query heads: Llama-3-8B's 32 query heads on 8 KV heads at
    4096 and 32768 keys, the same at batch 8, and 32 heads without grouping
    at 16384 keys. The dry run: two small shapes."""
    shapes = ([(1, 8, 2, 256), (2, 4, 4, 512)] if small else
              [(1, 32, 8, 4096), (1, 32, 8, 32768), (8, 32, 8, 4096),
               (1, 32, 32, 16384)])
    return [attention("decode_b%d_h%dx%d_s%d" % (b, hq, hkv, skv), b, hq,
                      hkv, 1, skv, 128, "f16", group="decode_timing",
                      builds=["fused"] + list(DECODE_BUILDS), variants=False)
            for b, hq, hkv, skv in shapes]
