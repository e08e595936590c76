#!/usr/bin/env python3
"""One decode step over a fixed-size KV cache, two tfc builds alternating:
the step returning the whole cache (--present=all, the default) and the
step returning only the new token's keys and values (--present=new), on the
same inputs.

  bench/.venv/bin/python bench/decoders/run.py --family llama ...  # the model
  bench/.venv/bin/python bench/decoders/fixed_cache.py [--family llama]
      [--capacity 2048] [--position 128] [--rounds 6] [--runs 40]
      [--threads 2]

Both builds are `--seq-len 1 --past-len C-1 --position-ids` over the random
model that run.py writes (bench/decoders/work/<family>-random-12l): one
build serves every step, the mask hides the unused slots, the new token's
key comes after them. The inputs: random keys and values in every slot,
the first --position slots and the new token visible, position_ids =
--position. Each round runs both builds once as fresh tfc-run processes
(--repeat --runs, 2 warm-up runs), in alternating order; the table gives
the median of the round medians, and the largest difference between the
two builds' hidden states.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", choices=("gpt2", "llama"), default="llama")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--capacity", type=int, default=2048)
    ap.add_argument("--position", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    work = os.path.join(HERE, "work")
    model = os.path.join(work, "%s-random-%dl" % (a.family, a.layers))
    if not os.path.exists(os.path.join(model, "model.safetensors")):
        sys.exit("fixed_cache.py: %s: no model; run bench/decoders/run.py "
                 "--family %s first" % (model, a.family))
    cap, pos = a.capacity - 1, a.position
    if not 0 <= pos <= cap:
        sys.exit("fixed_cache.py: --position must be in [0, %d]" % cap)
    bins = os.path.join(ROOT, "build", "bin")
    tag = "%s_%dl_cache%d" % (a.family, a.layers, a.capacity)
    libs = {}
    for present in ("all", "new"):
        lib = os.path.join(work, "%s_%s.so" % (tag, present))
        subprocess.run([os.path.join(bins, "tfc-compile"), "--hf", model,
                        "--batch", "1", "--seq-len", "1",
                        "--past-len=%d" % cap, "--position-ids",
                        "--present=" + present, "-o", lib], check=True,
                       capture_output=True)
        libs[present] = lib
    # The inputs, in the builds' order (tfc-run --describe).
    described = subprocess.run(
        [os.path.join(bins, "tfc-run"), libs["all"], "--describe"],
        check=True, capture_output=True, text=True).stdout
    shapes = [[int(d) for d in m.group(1).split(", ")]
              for m in re.finditer(r"^  input \d+ .*\[([0-9, ]+)\]",
                                   described, re.M)]
    rng = np.random.default_rng(0)
    inputs = []
    for i, shape in enumerate(shapes):
        path = os.path.join(work, "%s_in%d.npy" % (tag, i))
        if i == 0:
            x = rng.integers(0, 1000, shape).astype(np.int64)
        elif i == 1:
            x = np.zeros(shape, np.int64)
            x[:, :pos] = 1
            x[:, cap] = 1
        elif i == 2:
            x = np.full(shape, pos, np.int64)
        else:
            x = rng.standard_normal(shape).astype(np.float32)
        np.save(path, x)
        inputs += ["--input", path]
    # The hidden state, then every layer's keys and values.
    outputs = {p: [os.path.join(work, "%s_%s_out%d.npy" % (tag, p, i))
                   for i in range(1 + len(shapes) - 3)] for p in libs}
    medians = {p: [] for p in libs}
    for r in range(a.rounds):
        for p in (("all", "new") if r % 2 == 0 else ("new", "all")):
            cmd = [os.path.join(bins, "tfc-run"), libs[p], "--weights",
                   os.path.join(model, "model.safetensors")] + inputs + [
                       x for o in outputs[p] for x in ("--output", o)] + [
                       "--repeat", str(a.runs), "--warmup", "2",
                       "--threads", str(a.threads)]
            text = subprocess.run(cmd, check=True, capture_output=True,
                                  text=True)
            m = re.search(r"median ([0-9.]+) ms", text.stdout + text.stderr)
            medians[p].append(float(m.group(1)))
    hidden = [np.load(outputs[p][0]).astype(np.float64) for p in libs]
    diff = np.abs(hidden[0] - hidden[1]).max()
    print("\n### %s, %d blocks, one step over a %d-slot cache at position "
          "%d, %d threads\n" % (a.family, a.layers, a.capacity, pos,
                               a.threads))
    print("| build | median ms | round medians ms |\n|---|---:|---:|")
    for p in libs:
        print("| --present=%s | %.1f | %.1f-%.1f |" % (
            p, statistics.median(medians[p]), min(medians[p]),
            max(medians[p])))
    print("\n--present=new is %.2fx the speed of --present=all; hidden "
          "states differ by at most %.1e" % (
              statistics.median(medians["all"]) /
              statistics.median(medians["new"]), diff))


if __name__ == "__main__":
    sys.exit(main())
