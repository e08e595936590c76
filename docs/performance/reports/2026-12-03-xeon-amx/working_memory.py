"""The working memory of one run: what a model's temporaries take from the
runtime's caching allocator, for CPU and GPU builds of the same models.

For each model and build this loads the library in a fresh process, runs it
once and reads the allocator's counters (tfc_runtime.allocator_stats: the
host allocator for CPU builds, the device allocator for GPU builds): the
fresh bytes one run takes (a process's first run page-faults them on the
CPU; on the GPU they are device memory held until trimmed), how many
requests were served from blocks freed earlier in the same run, and what a
second run takes fresh (nothing, if every temporary is reused). The sizes
do not depend on the device: GPU builds run on the fake CUDA driver's PTX
interpreter when no driver is given (--driver), and give the counters a
device would.

Models: a random LLaMA (hidden 256, 4 blocks, 4 query heads on 2 K/V
heads, SwiGLU 1024; tests/Integration/CPU/llama.py's SMALL) and a random
GPT-2 of the same width (4 heads, 4 blocks; tests/Integration/CPU/gpt2.py),
batch 1, a prefill of --seq-len tokens (default 128).

  python3 docs/performance/reports/2026-12-03-xeon-amx/working_memory.py
      [--bin build/bin] [--compare OLD_BIN] [--driver PATH]
      [--targets cpu,nvptx]

--compare builds each model with a second tfc-compile (an older tree's
build/bin) as well and prints both.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "Integration", "CPU"))
sys.path.insert(0, os.path.join(ROOT, "tests", "pylib"))
sys.path.insert(0, os.path.join(ROOT, "runtime", "python"))

MIB = 1024.0 * 1024.0

# Runs in a fresh process: one model, two runs, the counters around each.
CHILD = r"""
import json, sys
import numpy as np
import tfc_runtime as tfc
lib, weights, inputs, device = sys.argv[1], sys.argv[2], sys.argv[3], \
    sys.argv[4] == "1"
data = np.load(inputs)
m = tfc.Model(lib, weights=weights)
out = []
for _ in range(2):
    before = tfc.allocator_stats(device=device)
    m.run(*[data[k] for k in sorted(data.files)])
    after = tfc.allocator_stats(device=device)
    out.append({k: after[k] - before[k] for k in after})
print(json.dumps(out))
"""


def models(work, rng, seq):
    """(name, model directory, inputs .npz) of each model."""
    import gpt2
    import llama
    from tfc_testing.arrays import random_tokens
    gpt2_cfg = dict(gpt2.CFG, n_embd=256, n_head=4, n_layer=4,
                    n_positions=seq, vocab_size=512)
    out = []
    for name, module, cfg in (
            ("LLaMA", llama, dict(llama.SMALL, max_position_embeddings=seq)),
            ("GPT-2", gpt2, gpt2_cfg)):
        directory = os.path.join(work, name)
        module.write_model(directory, rng, cfg)
        ids, mask = random_tokens(rng, cfg["vocab_size"], 1, seq)
        npz = os.path.join(directory, "inputs.npz")
        np.savez(npz, a_input_ids=ids, b_attention_mask=mask)
        out.append(("%s 4 blocks, prefill %d" % (name, seq), directory, npz))
    return out


def measure(bindir, target, directory, npz, seq, work, env, real_driver):
    lib = os.path.join(work, "m.so")
    cmd = [os.path.join(bindir, "tfc-compile"), "--hf", directory,
           "--batch", "1", "--seq-len", str(seq), "-o", lib,
           "--target=" + target]
    if target == "nvptx":
        cmd.append("--dtype=f16")
        if not real_driver:  # the interpreter runs PTX, not cubins
            cmd.append("--gpu-binary=ptx")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(r.stderr.strip())
    r = subprocess.run([sys.executable, "-c", CHILD, lib,
                        os.path.join(directory, "model.safetensors"), npz,
                        "1" if target == "nvptx" else "0"],
                       capture_output=True, text=True, env=env)
    if r.returncode:
        sys.exit("%s: %s" % (lib, r.stderr.strip()))
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    p.add_argument("--compare", help="another build's bin directory")
    p.add_argument("--driver", help="libcuda.so.1 to use for GPU builds "
                   "(default: the PTX interpreter of build/runtime/fixtures)")
    p.add_argument("--targets", default="cpu,nvptx")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    env = dict(os.environ, TFC_CUDA_DRIVER=a.driver or os.path.join(
        ROOT, "build", "runtime", "fixtures", "ptx_cuda.so"),
        PYTHONPATH=os.path.join(ROOT, "runtime", "python"))
    rng = np.random.default_rng(a.seed)
    builds = [("this build", a.bin)] + ([("--compare", a.compare)]
                                        if a.compare else [])
    print("| model | target | build | allocations | fresh blocks | fresh "
          "MiB | reused within the run | fresh MiB in a second run |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as work:
        for name, directory, npz in models(work, rng, a.seq_len):
            for target in a.targets.split(","):
                for label, bindir in builds:
                    first, second = measure(bindir, target, directory, npz,
                                            a.seq_len, work, env,
                                            bool(a.driver))
                    print("| %s | %s | %s | %d | %d | %.1f | %d | %.1f |" % (
                        name, target + (" f16" if target == "nvptx" else ""),
                        label, first["alloc_calls"], first["fresh_allocs"],
                        first["fresh_bytes"] / MIB, first["reused_allocs"],
                        second["fresh_bytes"] / MIB), flush=True)


if __name__ == "__main__":
    main()
