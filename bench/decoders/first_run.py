"""A process's first run of a LLaMA with and without a packed weights file.

A CPU model packs (and quantizes) every weight on its first use, so the
first run of a process takes longer than the rest; `tfc-run
--packed-weights FILE` saves the packed copies once and maps them in later
processes (runtime/README.md, "Packed weights"). For each build (f32,
bf16, int8 weights, int4 weights, int4 weights with int8 activations) and
each of a prefill of 128 tokens and one decode step after 127, this runs,
alternating in each round: a process without the file, a process with it.
Each reports `tfc-run --repeat 1 --warmup 0` (the first run's time), the
process's wall time and its peak resident memory; a last process per build
measures the later runs (`--repeat R --warmup 1`). Prints a markdown table
of medians.

  bench/.venv/bin/python bench/decoders/first_run.py [--rounds 5]

Needs bench/decoders/work from `bench/decoders/run.py --family llama
--layers 12 --seq-len 1 --past-len 127` (the 12-block random LLaMA and the
KV cache of 127 tokens, past_*.npy); the token ids are this script's.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
WORK = os.path.join(HERE, "work")
BUILDS = [("f32", []), ("bf16", ["--dtype=bf16"]),
          ("int8 weights", ["--quantize-weights=int8"]),
          ("int4 weights", ["--quantize-weights=int4"]),
          ("int4 weights, int8 activations",
           ["--quantize-weights=int4", "--quantize-activations=int8"])]


def run(args):
    """(first run ms or None, wall ms, peak RSS MiB) of one tfc-run."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = (time.perf_counter() - start) * 1e3
    out = proc.stdout.read()
    if status != 0:
        sys.exit("failed: %s\n%s" % (" ".join(args), out))
    m = re.search(r"median ([0-9.]+) ms", out)
    return (float(m.group(1)) if m else None, wall, usage.ru_maxrss / 1024)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    a = ap.parse_args()
    model = os.path.join(WORK, "llama-random-12l")
    weights = os.path.join(model, "model.safetensors")
    out_dir = os.path.join(WORK, "first_run")
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(0)
    np.save(os.path.join(out_dir, "ids128.npy"),
            rng.integers(0, 32000, (1, 128)).astype(np.int64))
    np.save(os.path.join(out_dir, "ids1.npy"),
            rng.integers(0, 32000, (1, 1)).astype(np.int64))
    np.save(os.path.join(out_dir, "mask128.npy"), np.ones((1, 128), np.int64))
    shapes = {
        "prefill": (["--seq-len", "128"],
                    [os.path.join(out_dir, "ids128.npy"),
                     os.path.join(out_dir, "mask128.npy")], 1, 5),
        "decode": (["--seq-len", "1", "--past-len", "127"],
                   [os.path.join(out_dir, "ids1.npy"),
                    os.path.join(out_dir, "mask128.npy")], 25, 20),
    }
    rows = []
    for name, flags in BUILDS:
        row = {"build": name}
        for shape, (shape_flags, inputs, outputs, repeat) in shapes.items():
            if shape == "decode":  # the cache, in the model's dtype
                suffix = "_bf16" if "--dtype=bf16" in flags else ""
                inputs = inputs + [
                    os.path.join(WORK, "past_%d_%s%s.npy" % (i, kv, suffix))
                    for i in range(12) for kv in "kv"]
            tag = re.sub(r"[^a-z0-9]+", "_", name) + "_" + shape
            lib = os.path.join(out_dir, tag + ".so")
            packed = os.path.join(out_dir, tag + ".packed")
            subprocess.run([os.path.join(a.bin, "tfc-compile"), "--hf", model,
                            "--batch", "1", "-o", lib] + shape_flags + flags,
                           check=True, stdout=subprocess.DEVNULL)
            base = [os.path.join(a.bin, "tfc-run"), lib, "--weights", weights,
                    "--threads", str(a.threads)]
            for p in inputs:
                base += ["--input", p]
            for i in range(outputs):
                base += ["--output", os.path.join(out_dir, "out_%d.npy" % i)]
            if os.path.exists(packed):
                os.remove(packed)
            saved = run(base + ["--repeat", "1", "--warmup", "0",
                                "--packed-weights", packed])
            size = os.path.getsize(packed) / 2**20
            plain, mapped = [], []
            for _ in range(a.rounds):
                plain.append(run(base + ["--repeat", "1", "--warmup", "0"]))
                mapped.append(run(base + ["--repeat", "1", "--warmup", "0",
                                          "--packed-weights", packed]))
            later = run(base + ["--repeat", str(repeat), "--warmup", "1"])
            med = [[statistics.median(x[k] for x in runs) for k in range(3)]
                   for runs in (plain, mapped)]
            row[shape] = (med, later[0], saved[1], size)
        rows.append(row)
    print("%s, %d rounds, %d threads" % (time.strftime("%Y-%m-%d %H:%M UTC",
                                                         time.gmtime()),
                                         a.rounds, a.threads))
    for shape in shapes:
        print("\n%s: first run ms, whole process ms, peak RSS MiB; without "
              "-> with the packed file\n" % shape)
        print("| build | first run | whole process | peak RSS MiB | later "
              "runs | process that saves | file MiB |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for row in rows:
            (p, m), later, saved, size = row[shape]
            print("| %s | %.0f -> **%.0f** | %.0f -> **%.0f** | %.0f -> %.0f "
                  "| %.1f | %.0f | %.0f |" % (row["build"], p[0], m[0], p[1],
                                               m[1], p[2], m[2], later, saved,
                                               size))


if __name__ == "__main__":
    main()
