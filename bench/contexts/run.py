"""Throughput of execution contexts: one loaded all-MiniLM-L6-v2 (batch 1,
128 tokens, f32, one OpenMP thread per run) serving 1 and then N requests at
once through tfc-run --concurrency, one process per measurement, rotated
over rounds. Prints each measurement, the median runs/s of each count and
the ratio of N contexts to 1 measured in the same rounds.

  python3 bench/contexts/run.py [--contexts 2] [--rounds 5] [--runs 40]
                                [--bin build/bin] [--work /tmp/tfc-contexts]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--contexts", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--runs", type=int, default=40)
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    p.add_argument("--work", default="/tmp/tfc-contexts")
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    model_dir = subprocess.check_output(
        ["bash", os.path.join(ROOT, "scripts", "install-model.sh")],
        text=True).strip()
    lib = os.path.join(a.work, "minilm-b1.so")
    subprocess.run([os.path.join(a.bin, "tfc-compile"), "--hf", model_dir,
                    "--batch", "1", "--seq-len", "128", "-o", lib],
                   check=True, stderr=subprocess.DEVNULL)
    rng = np.random.default_rng(0)
    ids, mask = (os.path.join(a.work, n) for n in ("ids.npy", "mask.npy"))
    np.save(ids, rng.integers(1000, 30000, (1, 128)).astype(np.int64))
    np.save(mask, np.ones((1, 128), np.int64))
    rates = {1: [], a.contexts: []}
    for r in range(a.rounds):
        order = [1, a.contexts] if r % 2 == 0 else [a.contexts, 1]
        for n in order:
            out = subprocess.run(
                [os.path.join(a.bin, "tfc-run"), lib, "--weights",
                 os.path.join(model_dir, "model.safetensors"), "--input", ids,
                 "--input", mask, "--output",
                 os.path.join(a.work, "y.npy"), "--threads", "1",
                 "--repeat", str(a.runs), "--warmup", "3", "--concurrency",
                 str(n)], check=True, capture_output=True, text=True).stdout
            print(out.strip())
            rates[n].append(float(re.search(r"([0-9.]+) runs/s", out)[1]))
    one, many = (statistics.median(rates[n]) for n in (1, a.contexts))
    print("median: 1 context %.2f runs/s, %d contexts %.2f runs/s: %.2fx" %
          (one, a.contexts, many, many / one))


if __name__ == "__main__":
    sys.exit(main())
