"""The instruction mix of tfc's GPU attention variants, on the PTX
interpreter (no GPU): what each fused f16 attention build executes per
mma.sync, and how much of it is shared-memory traffic and barriers.

An instruction count is not a time: the H200 run of scripts/device-check.sh
is what measures speed. The mix says where the issue slots go; a tensor
core needs several cycles per m16n8k16, so fewer instructions per mma.sync
leave it less idle when a kernel is issue-bound.

usage: instruction_mix.py [--bin build/bin] [--driver PATH] [--markdown]
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

VARIANTS = [
    ("default", []),
    ("ldmatrix", ["--gpu-ldmatrix"]),
    ("async", ["--gpu-async-copy"]),
    ("async32", ["--gpu-async-copy", "--gpu-warp-rows=32"]),
]
# B=1, H=2: the mix per block does not depend on how many blocks there are.
SHAPES = [(64, 1024, False), (64, 1024, True), (128, 1024, False),
          (128, 1024, True)]


def mlir(d, s, causal):
    t = "tensor<1x2x%dx%dxf16>" % (s, d)
    return ("func.func @main(%%q: %s, %%k: %s, %%v: %s) -> %s {\n"
            "  %%o = transformer.attention %%q, %%k, %%v %s: %s, %s, %s -> %s\n"
            "  return %%o : %s\n}\n" % (t, t, t, t,
                                        "{is_causal} " if causal else "",
                                        t, t, t, t, t))


def parse(line):
    """{class: warp-instructions} of one PTXEMU_STATS line."""
    stats = {"total": float(re.search(r"([0-9.]+) warp-instructions",
                                      line).group(1))}
    for name, value in re.findall(r", ([a-z0-9.]+) ([0-9.]+)", line):
        stats[name] = float(value)
    return stats


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    p.add_argument("--driver", default=os.path.join(
        ROOT, "build", "runtime", "fixtures", "ptx_cuda.so"))
    a = p.parse_args()
    env = dict(os.environ, TFC_CUDA_DRIVER=a.driver, PTXEMU_STATS="1")
    rng = np.random.default_rng(0)
    print("| D | S | causal | build | warp-instr. per mma.sync "
          "| ldmatrix + ld/st.shared per mma.sync | bar.sync per mma.sync "
          "| ex2 per mma.sync | blocks |")
    print("|---:|---:|---|---|---:|---:|---:|---:|---:|")
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
                lib = os.path.join(work, "a.so")
                subprocess.run([os.path.join(a.bin, "tfc-compile"), src, "-o",
                                lib, "--target=nvptx", "--gpu-binary=ptx"] +
                               flags, check=True, capture_output=True)
                r = subprocess.run(
                    [os.path.join(a.bin, "tfc-run"), lib] + inputs +
                    ["--output", os.path.join(work, "o.npy")], env=env,
                    check=True, capture_output=True, text=True)
                line = [x for x in r.stderr.splitlines()
                        if x.startswith("ptxemu: attention")][0]
                st = parse(line)
                mma = st["mma.sync"]
                smem = sum(st.get(k, 0) for k in ("ldmatrix", "ld.shared",
                                                   "st.shared"))
                blocks = re.search(r"grid (\d+)x(\d+)x(\d+)", line).groups()
                print("| %d | %d | %s | %s | %.2f | %.3f | %.4f | %.3f | %s |"
                      % (d, s, "yes" if causal else "no", label,
                         st["total"] / mma, smem / mma,
                         st.get("bar.sync", 0) / mma, st.get("ex2", 0) / mma,
                         "x".join(blocks)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
