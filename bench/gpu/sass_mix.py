"""The SASS of tfc's fused attention key-tile loop, per build: what ptxas
makes of each build's PTX for the H200 (sm_90 / sm_90a), counted in the
loop that walks the key tiles, with no GPU.

instruction_mix.py counts PTX instructions as the interpreter executes
them; this counts the machine instructions ptxas emits for the loop body
(statically: each instruction once, whichever branches a tile takes), so
it sees what PTX hides: a plain ex2.approx.f32 costs a compare, a halving
and a conditional square around its MUFU.EX2, ex2.approx.ftz.f32 only the
MUFU.EX2; register moves around wgmma; uniform-datapath arithmetic.
Each score a thread handles costs one MUFU.EX2 in the loop (plus one per
row for the rescale factor), so "per EX2" is about per score. Still a
count, not a time: the device check measures speed.

cuobjdump comes from NVIDIA's `nvidia-cuda-cuobjdump` wheel on PyPI,
unpacked once into build/tools with the `nvidia-cuda-nvdisasm` wheel it
needs (pip download; nothing is installed).

With --triton DIR: the same counts for the Triton attention kernels
that tests/Integration/GPU/triton/generate.py --mix wrote into DIR
(the tutorial's forward pass, each configuration; a causal kernel's
longest loop is its diagonal one, so only the others are listed).

usage: sass_mix.py [--bin build/bin] [--tools DIR] [--d 64,128]
                   [--triton DIR]
"""

import argparse
import collections
import glob
import gzip
import os
import re
import subprocess
import sys
import tempfile
import zipfile

import instruction_mix

ROOT = instruction_mix.ROOT


def cuobjdump(tools):
    """The path of cuobjdump (with nvdisasm beside it, which it runs),
    fetched from PyPI into `tools` if needed."""
    def find(name):
        found = glob.glob(os.path.join(tools, "**", "bin", name),
                          recursive=True)
        return found[0] if found else None
    for package, name in (("nvidia-cuda-cuobjdump", "cuobjdump"),
                          ("nvidia-cuda-nvdisasm", "nvdisasm")):
        if find(name):
            continue
        os.makedirs(tools, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q",
                        "--no-deps", package, "-d", tools], check=True)
        wheels = glob.glob(os.path.join(
            tools, package.replace("-", "_") + "-*.whl"))
        if not wheels:
            sys.exit("sass_mix: no %s wheel in %s" % (package, tools))
        with zipfile.ZipFile(wheels[0]) as z:
            z.extractall(tools)
        os.chmod(find(name), 0o755)
    return find("cuobjdump")


INSTRUCTION = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?);")


def kernel_sass(text, name):
    """[(address, opcode, text)] of kernel `name` in cuobjdump -sass
    output."""
    out, inside = [], False
    for line in text.splitlines():
        if "Function :" in line:
            inside = line.split("Function :")[1].strip() == name
            continue
        m = INSTRUCTION.match(line)
        if inside and m:
            body = m.group(2).strip()
            op = re.sub(r"^@!?U?P[0-9T]\s+", "", body).split()[0]
            out.append((int(m.group(1), 16), op, body))
    return out


def main_loop(code):
    """The key-tile loop: the longest backward branch whose body holds
    the tensor-core instructions, among those before the last EXIT (ptxas
    moves the retries of mbarrier waits after it, each a branch back into
    the code it left)."""
    best = None
    exits = [addr for addr, op, _ in code if op.startswith("EXIT")]
    for addr, op, body in code:
        if not op.startswith("BRA") or (exits and addr > exits[-1]):
            continue
        m = re.search(r"BRA(?:\.\S+)? (0x[0-9a-f]+)", body)
        if not m:
            continue
        target = int(m.group(1), 16)
        if target >= addr:
            continue
        body_ops = [o for a, o, _ in code if target <= a <= addr]
        if not any(o.startswith(("HMMA", "HGMMA")) for o in body_ops):
            continue
        if best is None or addr - target > best[1] - best[0]:
            best = (target, addr)
    if best is None:
        raise ValueError("no loop with tensor-core instructions")
    return [(a, o, t) for a, o, t in code if best[0] <= a <= best[1]]


CLASSES = [
    ("MUFU.EX2", lambda o: o == "MUFU.EX2"),
    ("FFMA/FMUL/FADD", lambda o: o.split(".")[0] in ("FFMA", "FMUL", "FADD")),
    ("FMNMX", lambda o: o.startswith("FMNMX")),
    ("F2FP", lambda o: o.startswith("F2FP")),
    ("HMMA/HGMMA", lambda o: o.startswith(("HMMA", "HGMMA"))),
    ("LDS/LDSM/STS", lambda o: o.split(".")[0] in ("LDS", "LDSM", "STS")),
    ("BAR/SYNCS", lambda o: o.split(".")[0] in ("BAR", "SYNCS", "WARPGROUP",
                                               "DEPBAR", "LDGDEPBAR")),
    ("uniform", lambda o: o.startswith("U") and o.split(".")[0] not in
     ("UTMALDG",)),
]


def count(dump, ptx, arch, kernel):
    """The table's cells from the loop SASS column on, for `kernel` of the
    PTX file `ptx` compiled for `arch`."""
    cubin = ptx + ".cubin"
    r = subprocess.run(["ptxas", "-arch=" + arch, "-v", ptx, "-o", cubin],
                       check=True, capture_output=True, text=True)
    regs = re.search(r"Used (\d+) registers", r.stderr)
    sass = subprocess.run(
        [dump, "-sass", cubin], check=True, capture_output=True, text=True,
        env=dict(os.environ, NVDISASM_PATH=os.path.dirname(dump))).stdout
    loop = main_loop(kernel_sass(sass, kernel))
    ops = collections.Counter(o for _, o, _ in loop)
    counts = {c: sum(n for o, n in ops.items() if f(o)) for c, f in CLASSES}
    ex2 = counts["MUFU.EX2"]
    cells = [str(len(loop)), str(ex2),
             "%.2f" % (len(loop) / ex2) if ex2 else "—"]
    cells += [str(counts[c]) for c, _ in CLASSES[1:]]
    return cells + [regs.group(1) if regs else "?"]


def triton(dump, kernels):
    """The not-causal tutorial kernels of `kernels` (generate.py --mix)."""
    head = ["D", "Triton config (BM x BN, warps, stages)", "loop SASS",
            "MUFU.EX2", "per EX2"] + [c for c, _ in CLASSES[1:]] + \
        ["registers"]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---:" if i > 1 else "---"
                         for i in range(len(head))) + "|")
    with tempfile.TemporaryDirectory(prefix="tfc-sass-") as work:
        for path in sorted(glob.glob(os.path.join(kernels, "tutorial_*"))):
            m = re.match(r"tutorial_sm90_f16_d(\d+)_(\d+)x(\d+)_w(\d+)_s(\d+)"
                         r"(_ws)?\.ptx\.gz$", os.path.basename(path))
            if not m:  # causal
                continue
            ptx = os.path.join(work, "t.ptx")
            with gzip.open(path) as f, open(ptx, "wb") as out:
                out.write(f.read())
            cells = [m.group(1), "%sx%s, %s, %s%s" % (
                m.group(2), m.group(3), m.group(4), m.group(5),
                ", warp-specialised" if m.group(6) else "")]
            cells += count(dump, ptx, "sm_90a", "attention_tutorial")
            print("| " + " | ".join(cells) + " |", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    p.add_argument("--tools", default=os.path.join(ROOT, "build", "tools"))
    p.add_argument("--d", default="64,128")
    p.add_argument("--triton")
    a = p.parse_args()
    dump = cuobjdump(a.tools)
    if a.triton:
        return triton(dump, a.triton)
    head = ["D", "causal", "build", "loop SASS", "MUFU.EX2", "per EX2"] + \
        [c for c, _ in CLASSES[1:]] + ["registers"]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---:" if i > 2 else "---"
                         for i in range(len(head))) + "|")
    with tempfile.TemporaryDirectory(prefix="tfc-sass-") as work:
        for d in [int(x) for x in a.d.split(",")]:
            for causal in (False, True):
                src = os.path.join(work, "a.mlir")
                with open(src, "w") as f:
                    f.write(instruction_mix.mlir(d, 4096, causal))
                for label, flags in instruction_mix.VARIANTS:
                    ptx = os.path.join(work, "a.ptx")
                    subprocess.run([os.path.join(a.bin, "tfc-compile"), src,
                                    "-o", ptx, "--target=nvptx",
                                    "--emit=ptx"] + flags,
                                   check=True, capture_output=True)
                    arch = ("sm_90a" if "--gpu-arch=sm_90a" in flags
                            else "sm_90")
                    cells = [str(d), "yes" if causal else "no", label]
                    cells += count(dump, ptx, arch, "attention_0")
                    print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
