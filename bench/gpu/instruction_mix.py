"""The instruction mix of tfc's GPU attention variants, on the PTX
interpreter (no GPU): what each fused f16 attention build executes per
16x8x16 product of tensor-core work (one mma.sync m16n8k16; a warp's share
of a wgmma m64nNk16 counts as N / 8 of them), and how much of it is
shared-memory traffic and barriers.

An instruction count is not a time: the H200 run of scripts/device-check.sh
is what measures speed. The mix says where the issue slots go; a tensor
core needs several cycles per m16n8k16, so fewer instructions per product
leave it less idle when a kernel is issue-bound. A warp's wgmma is one
asynchronous instruction for N / 8 products (up to 32) and reads its B
operand (and A, in the SS form) from shared memory itself, so its counts
say little about tensor-core throughput or shared-memory traffic next to
mma.sync's.

With --gemm: tfc's f16 GEMM (f32 C) of 512^3 instead, in its mma.sync,
wgmma and TMA builds, with the same columns (bench/gpu/triton_mix.py
counts Triton's).

usage: instruction_mix.py [--bin build/bin] [--driver PATH] [--gemm]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
# (The other scripts of bench/gpu import this one, and with it tfc_testing.)
sys.path.insert(0, os.path.join(ROOT, "tests", "pylib"))
from tfc_testing import attention  # noqa: E402
from tfc_testing import mlir as mlir_text  # noqa: E402
# The device check's builds, every flag spelt out ("tma2" is tfc-compile's
# default on sm_90a; "mma" the register-staged mma.sync kernel).
from tfc_testing.gpu_builds import GPU_VARIANTS  # noqa: E402

VARIANTS = list(GPU_VARIANTS.items())
GEMM_VARIANTS = [("mma.sync", GPU_VARIANTS["mma"]),
                 ("wgmma", GPU_VARIANTS["wgmma"]),
                 ("tma", GPU_VARIANTS["tma"])]
GEMM_MLIR = mlir_text.matmul(1, 512, 512, 512, "f16")
# B=1, H=2: the mix per block does not depend on how many blocks there are.
SHAPES = [(64, 1024, False), (64, 1024, True), (128, 1024, False),
          (128, 1024, True)]


def mlir(d, s, causal):
    """f16 attention B=1, H=2, Sq = Skv = s, head dimension d."""
    return attention.function(1, 2, 2, s, s, d, dtype="f16", causal=causal)


def counts(line):
    """{class: warp-instructions} of one PTXEMU_STATS line, with "total"."""
    stats = {"total": float(re.search(r"([0-9.]+) warp-instructions",
                                      line).group(1))}
    for name, value in re.findall(r", ([a-z0-9.]+) ([0-9.]+)", line):
        stats[name] = float(value)
    return stats


def interpreter():
    """The command line's --bin and --driver, and the environment that runs
    tfc-run's GPU models on the PTX interpreter with its statistics."""
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    p.add_argument("--driver", default=os.path.join(
        ROOT, "build", "runtime", "fixtures", "ptx_cuda.so"))
    p.add_argument("--gemm", action="store_true")
    a = p.parse_args()
    return a, dict(os.environ, TFC_CUDA_DRIVER=a.driver, PTXEMU_STATS="1")


def parse(line):
    """counts() of one PTXEMU_STATS line, with "products": the 16x8x16
    products of tensor-core work, one per
    mma.sync and, per warp, N / 8 per wgmma m64nNk16 (total / the line's
    "(X per wgmma, Y per 16x8x16 of it)" Y, which it prints to 2
    decimals; mma.sync builds print "(X per mma.sync)" instead, X =
    total / mma.sync)."""
    stats = counts(line)
    products = 0.0
    m = re.search(r"\(([0-9.]+) per mma\.sync\)", line)
    if m:  # the count itself where the line has it: not rounded
        products += stats.get("mma.sync", stats["total"] / float(m.group(1)))
    m = re.search(r"\(([0-9.]+) per wgmma, ([0-9.]+) per 16x8x16 of it\)",
                  line)
    if m:
        products += stats["total"] / float(m.group(2))
    if not products:
        raise ValueError("no mma.sync or wgmma in: " + line)
    stats["products"] = products
    return stats


def row(st, line):
    """The table's columns after the labels: per 16x8x16 product, the
    warp-instructions, the shared-memory ones, bar.sync, ex2, the MMA
    instructions; then the grid."""
    n = st["products"]
    smem = sum(st.get(k, 0) for k in ("ldmatrix", "ld.shared", "st.shared"))
    mma = st.get("mma.sync", 0) + st.get("wgmma", 0)
    blocks = re.search(r"grid (\d+)x(\d+)x(\d+)", line).groups()
    return "%.2f | %.3f | %.4f | %.3f | %.3f | %s |" % (
        st["total"] / n, smem / n, st.get("bar.sync", 0) / n,
        st.get("ex2", 0) / n, mma / n, "x".join(blocks))


def run_model(a, env, work, src, flags, inputs, kernel):
    """parse() of the PTXEMU_STATS line of `kernel` when the model of `src`
    built with `flags` runs on `inputs`, and the line."""
    lib = os.path.join(work, "a.so")
    subprocess.run([os.path.join(a.bin, "tfc-compile"), src, "-o", lib,
                    "--target=nvptx", "--gpu-binary=ptx"] + flags,
                   check=True, capture_output=True)
    r = subprocess.run([os.path.join(a.bin, "tfc-run"), lib] + inputs +
                       ["--output", os.path.join(work, "o.npy")], env=env,
                       check=True, capture_output=True, text=True)
    line = [x for x in r.stderr.splitlines()
            if x.startswith("ptxemu: " + kernel)][0]
    return parse(line), line


def gemm(a, env, rng):
    print("| build | warp-instr. per 16x8x16 "
          "| ldmatrix + ld/st.shared per 16x8x16 | bar.sync per 16x8x16 "
          "| ex2 per 16x8x16 | mma.sync or wgmma per 16x8x16 | blocks |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="tfc-mix-") as work:
        src = os.path.join(work, "g.mlir")
        with open(src, "w") as f:
            f.write(GEMM_MLIR)
        inputs = []
        for name in "ab":
            path = os.path.join(work, name + ".npy")
            np.save(path, rng.standard_normal((1, 512, 512)).astype(
                np.float16))
            inputs += ["--input", path]
        for label, flags in GEMM_VARIANTS:
            st, line = run_model(a, env, work, src, flags, inputs, "matmul")
            print("| %s | %s" % (label, row(st, line)), flush=True)
    return 0


def main():
    a, env = interpreter()
    rng = np.random.default_rng(0)
    if a.gemm:
        return gemm(a, env, rng)
    print("| D | S | causal | build | warp-instr. per 16x8x16 "
          "| ldmatrix + ld/st.shared per 16x8x16 | bar.sync per 16x8x16 "
          "| ex2 per 16x8x16 | mma.sync or wgmma per 16x8x16 | blocks |")
    print("|---:|---:|---|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="tfc-mix-") as work:
        for d, s, causal in SHAPES:
            src = os.path.join(work, "a.mlir")
            with open(src, "w") as f:
                f.write(mlir(d, s, causal))
            inputs = []
            for name in "qkv":
                path = os.path.join(work, name + ".npy")
                np.save(path, rng.standard_normal((1, 2, s, d)).astype(
                    np.float16))
                inputs += ["--input", path]
            for label, flags in VARIANTS:
                st, line = run_model(a, env, work, src, flags, inputs,
                                     "attention")
                print("| %d | %d | %s | %s | %s" % (
                    d, s, "yes" if causal else "no", label, row(st, line)),
                    flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
