#!/usr/bin/env python3
"""Tensor parallelism on one machine: a decoder's 1-rank build against its
2-rank build (tfc-compile --tensor-parallel=2) under mpirun, on the CPU.

  bash bench/minilm/setup_peers.sh          # once: bench/.venv (transformers)
  bench/.venv/bin/python bench/tensor_parallel/run.py [--family llama|gpt2]
      [--layers 12] [--seq-len 128] [--past-len 127] [--cores 2]
      [--rounds 4] [--runs 10]

The model is bench/decoders/run.py's (random weights of seed 0: a LLaMA
of hidden 768, 12 query heads on 4 K/V heads, or GPT-2 small's shape),
its last hidden state (LlamaModel, GPT2Model: no LM head). Two phases: prefill of --seq-len tokens, and one decode step
after a cache of --past-len tokens (zeros: the cost does not depend on
them). The 1-rank build runs with --cores threads; the 2-rank build as
`mpirun -np 2 --bind-to none`, each rank with --cores / 2 threads (on one
machine the ranks share its cores: loopback, shared memory). Each round
runs both as fresh processes, in an order rotated every round; a
system's figure is the median of its round medians (tfc-run --repeat).
The 2-rank outputs are checked against the 1-rank ones.
"""
import argparse
import importlib.util
import os
import re
import statistics
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
WORK = os.path.join(HERE, "work")


def load(name, *path):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, *path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed(argv):
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode:
        sys.exit("run.py: %s failed:\n%s%s" % (" ".join(argv), out.stdout,
                                               out.stderr))
    m = re.search(r"median ([\d.]+) ms", out.stdout + out.stderr)
    if not m:
        sys.exit("run.py: no median in:\n" + out.stdout + out.stderr)
    return float(m.group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--family", default="llama", choices=["llama", "gpt2"])
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--past-len", type=int, default=127)
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    a = p.parse_args()
    if a.cores < 2 or a.cores % 2:
        sys.exit("run.py: --cores %d: an even count, 2 or more" % a.cores)
    decoders = load("bench_decoders_run", "bench", "decoders", "run.py")
    model = os.path.join(WORK, "%s-%dl" % (a.family, a.layers))
    decoders.make_model(model, a.family, a.layers)
    weights = os.path.join(model, "model.safetensors")
    phases = [("prefill", a.seq_len, 0), ("decode step", 1, a.past_len)]
    rng = np.random.default_rng(1)
    print("%s, %d layers, random weights; %d cores; %d rounds x %d runs" % (
        a.family, a.layers, a.cores, a.rounds, a.runs))
    for name, seq, past in phases:
        files = {}
        for ranks in (1, 2):
            so = os.path.join(WORK, "%s-%d-%d-tp%d.so" % (a.family, seq, past,
                                                          ranks))
            cmd = [os.path.join(a.bin, "tfc-compile"), "--hf", model,
                   "--batch", "1", "--seq-len", str(seq),
                   "-o", so]
            if past:
                cmd += ["--past-len", str(past)]
            if ranks > 1:
                cmd.append("--tensor-parallel=%d" % ranks)
            subprocess.run(cmd, check=True, capture_output=True)
            files[ranks] = so
        ids = rng.integers(0, 1000, (1, seq)).astype(np.int64)
        inputs = [ids, np.ones((1, past + seq), np.int64)]
        if past:
            import json
            with open(os.path.join(model, "config.json")) as f:
                cfg = json.load(f)
            heads = cfg.get("num_key_value_heads") or cfg.get(
                "num_attention_heads") or cfg["n_head"]
            hidden = cfg.get("hidden_size") or cfg["n_embd"]
            dim = hidden // (cfg.get("num_attention_heads") or cfg["n_head"])
            kv = np.zeros((1, heads, past, dim), np.float32)
            inputs += [kv] * (2 * a.layers)
        argv = {}
        outs = {}
        for ranks, so in files.items():
            io = []
            for k, x in enumerate(inputs):
                path = os.path.join(WORK, "in%d.npy" % k)
                if ranks == 1:
                    np.save(path, x)
                io += ["--input", path]
            outs[ranks] = os.path.join(WORK, "out%d.npy" % ranks)
            # With a cache, the new keys and values follow (present.L.*).
            for k in range(2 * a.layers if past else 0):
                io += ["--output", os.path.join(WORK, "present%d_%d.npy" %
                                                (ranks, k))]
            run = [os.path.join(a.bin, "tfc-run"), so, "--weights", weights] \
                + ["--output", outs[ranks]] + io + [
                    "--repeat", str(a.runs), "--warmup", "2", "--threads",
                    str(a.cores // ranks)]
            if ranks > 1:
                run = ["mpirun", "-q", "-np", str(ranks), "--bind-to", "none",
                       "--oversubscribe"] + (["--allow-run-as-root"]
                                             if os.getuid() == 0 else []) + run
            argv[ranks] = run
        medians = {1: [], 2: []}
        for r in range(a.rounds):
            for ranks in ((1, 2) if r % 2 == 0 else (2, 1)):
                medians[ranks].append(timed(argv[ranks]))
        one, two = (np.load(outs[k]).astype(np.float64) for k in (1, 2))
        err = np.linalg.norm(two - one) / np.linalg.norm(one)
        t1, t2 = (statistics.median(medians[k]) for k in (1, 2))
        print("  %s (%d token%s%s): 1 rank %.2f ms, 2 ranks %.2f ms, "
              "speedup %.2fx; 2-rank output vs 1-rank: %.1e relative" % (
                  name, seq, "s" if seq > 1 else "",
                  ", after %d" % past if past else "", t1, t2,
                  t1 / t2, err))
        print("    round medians: 1 rank %s; 2 ranks %s" % (
            ", ".join("%.2f" % m for m in medians[1]),
            ", ".join("%.2f" % m for m in medians[2])))


if __name__ == "__main__":
    main()
