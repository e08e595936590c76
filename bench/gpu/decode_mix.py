"""What tfc's GPU decode kernel executes against the tiled flash-attention
kernel it replaces for few query rows per KV head, on the PTX interpreter
(no GPU): f16 decode attention (one query row per head), D = 128, the
default build (the split-KV decode kernel and its combine), the same on
tensor cores (--gpu-decode-mma) and --gpu-decode-kernel=false (the tiled
mma.sync kernel), plus what ptxas
reports for each kernel (registers, shared memory) and the blocks per SM
those allow on an H200 (65536 registers, 227 KiB of shared memory per SM;
at most 32 blocks or 64 warps).

Counts, not times: decode is bound by reading K and V from memory, and
what the counts show is how many blocks share that work, how often each
K/V byte is loaded (global loads and cp.async, in warp-instructions) and
what the arithmetic around it costs per key. The H200 run of
scripts/device-check.sh measures the time.

usage: decode_mix.py [--bin build/bin] [--driver PATH]
"""

import os
import re
import subprocess
import sys
import tempfile

import numpy as np

from instruction_mix import counts, interpreter
from tfc_testing import attention  # (on the path instruction_mix set)
from tfc_testing.gpu_builds import GPU_VARIANTS

# The tiled kernel as the "mma" build of the device check makes it
# (register-staged mma.sync), which these counts were first taken on.
BUILDS = [("decode", []),
          ("decode mma", ["--gpu-decode-mma"]),
          ("tiled", ["--gpu-decode-kernel=false"] + GPU_VARIANTS["mma"])]
# (B, Hq, Hkv, Skv): grouped-query heads (Llama-3-8B's 32 on 8) and plain
# multi-head attention.
SHAPES = [(1, 32, 8, 4096), (1, 32, 32, 4096), (4, 32, 8, 2048)]
D = 128


def stats(line):
    """counts() of a PTXEMU_STATS line, with the grid's "blocks"."""
    out = counts(line)
    grid = [int(x) for x in re.search(r"grid (\d+)x(\d+)x(\d+)",
                                      line).groups()]
    out["blocks"] = grid[0] * grid[1] * grid[2]
    return out


def ptxas(ptx):
    """{kernel: (registers, shared bytes)} from ptxas -v, for the PTX's
    own .target."""
    with open(ptx) as f:
        arch = re.search(r"^\.target (\w+)", f.read(), re.M).group(1)
    r = subprocess.run(["ptxas", "-arch=" + arch, "-v", ptx, "-o", os.devnull],
                       capture_output=True, text=True, check=True)
    out, name = {}, None
    for line in r.stderr.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            name = m.group(1)
        m = re.search(r"Used (\d+) registers.*?(?:(\d+) bytes smem)?$", line)
        if m and name:
            out[name] = (int(m.group(1)), int(m.group(2) or 0))
    return out


def blocks_per_sm(registers, shared, threads=128):
    regs = 65536 // (roundup(registers, 8) * threads)
    smem = 227 * 1024 // max(shared, 1)
    return min(regs, smem, 32, 64 // (threads // 32))


def roundup(x, m):
    return (x + m - 1) // m * m


def main():
    a, env = interpreter()
    rng = np.random.default_rng(0)
    print("| B x Hq x Hkv x Skv | build | kernel | blocks | registers "
          "| shared KiB | blocks/SM | warp-instr. per key | global loads "
          "+ cp.async per key | shfl per key | bar.sync per key |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="tfc-decode-") as work:
        for b, hq, hkv, skv in SHAPES:
            src = os.path.join(work, "a.mlir")
            with open(src, "w") as f:
                f.write(attention.function(b, hq, hkv, 1, skv, D,
                                           dtype="f16"))
            inputs = []
            for name, shape in (("q", (b, hq, 1, D)), ("k", (b, hkv, skv, D)),
                                ("v", (b, hkv, skv, D))):
                path = os.path.join(work, name + ".npy")
                np.save(path, rng.standard_normal(shape).astype(np.float16))
                inputs += ["--input", path]
            # Per key of a KV head: B x Hkv x Skv keys in all.
            keys = b * hkv * skv
            for label, flags in BUILDS:
                lib, ptx = (os.path.join(work, "a" + e) for e in (".so",
                                                                  ".ptx"))
                compile_ = [os.path.join(a.bin, "tfc-compile"), src,
                            "--target=nvptx"] + flags
                subprocess.run(compile_ + ["-o", lib, "--gpu-binary=ptx"],
                               check=True, capture_output=True)
                subprocess.run(compile_ + ["-o", ptx, "--emit=ptx"],
                               check=True, capture_output=True)
                resources = ptxas(ptx)
                # Dynamic shared memory (the decode kernel's tiles) is in
                # the launch, not in ptxas's count.
                # (The architecture is not the pass's but the pipeline's.)
                option = " ".join(f[len("--gpu-"):] for f in flags
                                  if not f.startswith("--gpu-arch="))
                host = subprocess.run(
                    [os.path.join(a.bin, "tfc-opt"), src,
                     "--convert-transformer-to-nvptx" +
                     ("=" + option if option else "")],
                    check=True, capture_output=True, text=True).stdout
                # (The constant's SSA name carries its value.)
                dynamic = {k: int(v) for k, v in re.findall(
                    r"@tfc_fused::@(\w+) .*dynamic_shared_memory_size "
                    r"%c(\d+)_i32", host)}
                r = subprocess.run(
                    [os.path.join(a.bin, "tfc-run"), lib] + inputs +
                    ["--output", os.path.join(work, "o.npy")], env=env,
                    check=True, capture_output=True, text=True)
                for line in r.stderr.splitlines():
                    m = re.match(r"ptxemu: (attention\w*) ", line)
                    if not m:
                        continue
                    st = stats(line)
                    regs, smem = resources.get(m.group(1), (0, 0))
                    smem += dynamic.get(m.group(1), 0)
                    print("| %dx%dx%dx%d | %s | %s | %d | %d | %.1f | %d "
                          "| %.1f | %.2f | %.2f | %.3f |" % (
                              b, hq, hkv, skv, label, m.group(1),
                              st["blocks"], regs, smem / 1024,
                              blocks_per_sm(regs, smem), st["total"] / keys,
                              (st.get("ld.global", 0) +
                               st.get("cp.async", 0)) / keys,
                              st.get("shfl", 0) / keys,
                              st.get("bar.sync", 0) / keys), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
