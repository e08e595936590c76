"""A CPU model's weights file leaves the process's resident memory after
the first run (runtime/src/common/Weights.cpp, releaseWeightPages): the kernels
have packed and quantized their own copies, so its pages are dropped, and
the runs after it read the same values.

A random LLaMA (hidden 256, 4 blocks: 17 MB of f32 weights) compiled with
int8 weights runs three times through the Python API. Binding maps the file
without reading the weights; the first run reads every one of them to
quantize it. Checked: the file's resident pages (RssFile, and RssShmem
for a file on tmpfs) grew by less than a quarter of the weights over the
first run (without the release they grow by all of them, and a control
read of the whole file through a map of its own shows that they count
such pages), the three runs' outputs are identical, and they match the
float64 reference on the weights as the build quantizes them within 1e-4
(as tests/Integration/CPU/llama.py holds its int8 builds).
  weight_pages.py LIBTFCRT BINDIR WORKDIR
"""
import mmap
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "runtime", "python"))
sys.path.append(os.path.join(HERE, "..", "..", "Integration", "CPU"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "pylib"))
import tfc_runtime as tfc  # noqa: E402
import llama  # noqa: E402
from tfc_testing.arrays import random_tokens, relative_error  # noqa: E402
from tfc_testing.checks import Checks  # noqa: E402
from tfc_testing.reference import quantized_weight  # noqa: E402


def rss_file_bytes():
    """Resident pages of mapped files: RssFile, plus RssShmem for a file on
    tmpfs."""
    total, seen = 0, 0
    for line in open("/proc/self/status"):
        if line.startswith(("RssFile:", "RssShmem:")):
            total += int(line.split()[1]) * 1024
            seen += 1
    if seen != 2:
        raise SystemExit("FAIL: /proc/self/status lacks RssFile or RssShmem")
    return total


def main():
    runtime, bindir, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(20261203)
    model = os.path.join(work, "llama")
    cfg, w, weights = llama.write_small_model(model, rng)
    size = os.path.getsize(weights)
    lib = os.path.join(work, "llama.so")
    subprocess.run([os.path.join(bindir, "tfc-compile"), "--hf", model,
                    "--batch", "1", "--seq-len", "8",
                    "--quantize-weights=int8", "-o", lib], check=True,
                   stdout=subprocess.DEVNULL)
    ids, mask = random_tokens(rng, cfg["vocab_size"], 1, 8)
    rt = tfc.load_runtime(runtime)
    checks = Checks()
    expect = checks.expect

    with tfc.Model(lib, weights=weights, runtime=rt) as m:
        bound = rss_file_bytes()
        outs = [m.run(ids, mask)]
        grew = rss_file_bytes() - bound
        expect("the first run's resident pages of the %d-byte weights file "
               "grew by %d bytes (less than a quarter)" % (size, grew),
               grew < size // 4)
        outs += [m.run(ids, mask), m.run(ids, mask)]
        expect("the runs after the release give the first run's output",
               all(np.array_equal(o, outs[0]) for o in outs[1:]))
        wq = {n: quantized_weight(x, 1, 8) if n.endswith("_proj.weight")
              else x for n, x in w.items()}
        err = relative_error(outs[0], llama.reference(cfg, wq, ids, mask))
        expect("hidden state against float64 on the int8 weights: rel.err "
               "%.1e (bound 1e-4)" % err, err < 1e-4)
    # The control: the whole file read through a map of this process's own
    # shows up in the count.
    with open(weights, "rb") as f:
        view = mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ)
        before = rss_file_bytes()
        sum(view[i] for i in range(0, size, 4096))
        read = rss_file_bytes() - before
        view.close()
    expect("control: reading the file through a map grew the count by %d "
           "bytes (at least three quarters of it)" % read,
           read >= size * 3 // 4)
    print("%d failed" % checks.failed)
    sys.exit(1 if checks.failed else 0)


main()
