"""The instruction mix of Triton's flash attention on the PTX interpreter,
for comparison with tfc's builds (instruction_mix.py): the same columns,
per 16x8x16 product of tensor-core work, f16, B x H = 2, S = 1024.

The kernels are Triton's tutorial 06 forward pass (_attn_fwd on TMA
descriptors, scale folded into exp2, causal as unmasked tiles then the
diagonal block) in the configurations of its Hopper autotuning list that
Triton 3.5.1 builds, compiled without a GPU by

  TRITON_DISABLE_LINE_INFO=1 /tmp/triton-venv/bin/python \\
      tests/Integration/GPU/triton/generate.py --mix --out DIR

(Triton installed as generate.py says), then run here by
tests/Integration/GPU/triton/run.py, which also checks each output against
float64. A count, not a time (instruction_mix.py says what it leaves out).
Then the same for the f16 matmuls of 512^3 that generate.py --mix writes
(the matmul tutorial's configurations, pointer loads on sm_80 and sm_90,
and TMA), next to `instruction_mix.py --gemm` for tfc's GEMMs.

usage: triton_mix.py DIR [--driver build/runtime/fixtures/ptx_cuda.so]
"""
import argparse
import os
import re
import subprocess
import sys

from instruction_mix import ROOT, parse


def columns(st):
    """Per 16x8x16 product: warp-instructions, shared-memory ones,
    bar.sync, ex2, mma.sync or wgmma."""
    n = st["products"]
    smem = sum(st.get(k, 0) for k in ("ldmatrix", "ld.shared", "st.shared"))
    return "%.2f | %.3f | %.4f | %.3f | %.3f |" % (
        st["total"] / n, smem / n, st.get("bar.sync", 0) / n,
        st.get("ex2", 0) / n, (st.get("wgmma", 0) + st.get("mma.sync", 0)) / n)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("kernels")
    p.add_argument("--driver", default=os.path.join(
        ROOT, "build", "runtime", "fixtures", "ptx_cuda.so"))
    p.add_argument("--seq", type=int, default=1024)
    a = p.parse_args()
    r = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tests", "Integration", "GPU",
                                      "triton", "run.py"), a.driver,
         "--kernels", a.kernels, "--heads", "2", "--seq", str(a.seq)],
        env=dict(os.environ, PTXEMU_STATS="1"), capture_output=True,
        text=True)
    lines = (r.stdout + r.stderr).splitlines()
    stats = [x for x in lines if x.startswith("ptxemu: ")]
    results = [x for x in lines if x.startswith(("ok ", "FAIL "))]
    if r.returncode or len(stats) != len(results):
        sys.exit("run.py failed:\n" + "\n".join(lines))
    rows = [(result.split()[1].rstrip(":"), parse(line))
            for line, result in zip(stats, results)]
    print("| D | causal | Triton config (BM x BN, warps, stages) "
          "| warp-instr. per 16x8x16 | ldmatrix + ld/st.shared per 16x8x16 "
          "| bar.sync per 16x8x16 | ex2 per 16x8x16 | wgmma per 16x8x16 |")
    print("|---:|---|---|---:|---:|---:|---:|---:|")
    for name, st in rows:
        m = re.match(r"tutorial_sm90_f16_d(\d+)(_causal)?_(\d+)x(\d+)_w(\d+)"
                     r"_s(\d+)(_ws)?$", name)
        if m:
            print("| %s | %s | %sx%s, %s, %s%s | %s" % (
                m.group(1), "yes" if m.group(2) else "no", m.group(3),
                m.group(4), m.group(5), m.group(6),
                ", warp-specialised" if m.group(7) else "", columns(st)))
    print()
    print("| Triton matmul (arch, loads, BM x BN x BK, warps, stages) "
          "| warp-instr. per 16x8x16 | ldmatrix + ld/st.shared per 16x8x16 "
          "| bar.sync per 16x8x16 | ex2 per 16x8x16 "
          "| mma.sync or wgmma per 16x8x16 |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, st in rows:
        m = re.match(r"gemm_(tma_)?sm(\d+)_(\d+x\d+x\d+)_w(\d+)_s(\d+)$",
                     name)
        if m:
            print("| sm_%s, %s, %s, %s, %s | %s" % (
                m.group(2), "TMA" if m.group(1) else "pointers", m.group(3),
                m.group(4), m.group(5), columns(st)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
