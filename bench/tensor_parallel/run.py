#!/usr/bin/env python3
"""Tensor parallelism on one machine: a decoder's 1-rank build against its
2-rank build (tfc-compile --tensor-parallel=2) under mpirun, on the CPU.

  bash bench/minilm/setup_peers.sh          # once: bench/.venv (transformers)
  bench/.venv/bin/python bench/tensor_parallel/run.py [--family llama|gpt2]
      [--layers 12] [--seq-len 128] [--past-len 127] [--cores 2]
      [--rounds 4] [--runs 10] [--logits]

The model is bench/decoders/run.py's (random weights of seed 0: a LLaMA
of hidden 768, 12 query heads on 4 K/V heads, or GPT-2 small's shape),
its last hidden state (LlamaModel, GPT2Model: no LM head), or with
--logits its logits (LlamaForCausalLM, GPT2LMHeadModel), the 2-rank build then timed twice:
the head split by vocabulary (the default) and replicated
(--tensor-parallel-vocab=replicate). Two phases: prefill of --seq-len
tokens, and one decode step after a cache of --past-len tokens (zeros:
the cost does not depend on them). The 1-rank build runs with --cores threads; the 2-rank build as
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
    p.add_argument("--logits", action="store_true")
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    a = p.parse_args()
    if a.cores < 2 or a.cores % 2:
        sys.exit("run.py: --cores %d: an even count, 2 or more" % a.cores)
    decoders = load("bench_decoders_run", "bench", "decoders", "run.py")
    model = os.path.join(WORK, "%s-%dl%s" % (a.family, a.layers,
                                             "-head" if a.logits else ""))
    decoders.make_model(model, a.family, a.layers, head=a.logits)
    weights = os.path.join(model, "model.safetensors")
    phases = [("prefill", a.seq_len, 0), ("decode step", 1, a.past_len)]
    rng = np.random.default_rng(1)
    print("%s, %d layers, random weights, %s; %d cores; %d rounds x %d runs"
          % (a.family, a.layers, "logits" if a.logits else "hidden state",
             a.cores, a.rounds, a.runs))
    # The systems: name -> (ranks, tfc-compile flags).
    systems = {"1 rank": (1, []), "2 ranks": (2, ["--tensor-parallel=2"])}
    if a.logits:
        systems["2 ranks, head replicated"] = (
            2, ["--tensor-parallel=2", "--tensor-parallel-vocab=replicate"])
    for name, seq, past in phases:
        files = {}
        for k, (system, (ranks, flags)) in enumerate(systems.items()):
            so = os.path.join(WORK, "%s-%d-%d-%d.so" % (a.family, seq, past, k))
            cmd = [os.path.join(a.bin, "tfc-compile"), "--hf", model,
                   "--batch", "1", "--seq-len", str(seq),
                   "-o", so] + flags
            if past:
                cmd += ["--past-len", str(past)]
            if a.logits:
                cmd.append("--output=logits")
            subprocess.run(cmd, check=True, capture_output=True)
            files[system] = (ranks, so)
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
        io = []
        for k, x in enumerate(inputs):
            path = os.path.join(WORK, "in%d.npy" % k)
            np.save(path, x)
            io += ["--input", path]
        argv = {}
        outs = {}
        for n, (system, (ranks, so)) in enumerate(files.items()):
            outs[system] = os.path.join(WORK, "out%d.npy" % n)
            # With a cache, the new keys and values follow (present.L.*).
            present = [arg for k in range(2 * a.layers if past else 0)
                       for arg in ("--output", os.path.join(
                           WORK, "present%d_%d.npy" % (n, k)))]
            run = [os.path.join(a.bin, "tfc-run"), so, "--weights", weights] \
                + ["--output", outs[system]] + io + present + [
                    "--repeat", str(a.runs), "--warmup", "2", "--threads",
                    str(a.cores // ranks)]
            if ranks > 1:
                run = ["mpirun", "-q", "-np", str(ranks), "--bind-to", "none",
                       "--oversubscribe"] + (["--allow-run-as-root"]
                                             if os.getuid() == 0 else []) + run
            argv[system] = run
        # Each round runs every system once, the order rotated by one.
        order = list(files)
        medians = {system: [] for system in order}
        for r in range(a.rounds):
            shift = r % len(order)
            for system in order[shift:] + order[:shift]:
                medians[system].append(timed(argv[system]))
        print("  %s (%d token%s%s):" % (name, seq, "s" if seq > 1 else "",
                                        ", after %d" % past if past else ""))
        one = np.load(outs["1 rank"]).astype(np.float64)
        t1 = statistics.median(medians["1 rank"])
        for system in order:
            t = statistics.median(medians[system])
            got = np.load(outs[system]).astype(np.float64)
            err = np.linalg.norm(got - one) / np.linalg.norm(one)
            print("    %-26s %8.2f ms  %.2fx the 1-rank build; output vs "
                  "1-rank %.1e relative; round medians %s" % (
                      system, t, t1 / t, err,
                      ", ".join("%.2f" % m for m in medians[system])))


if __name__ == "__main__":
    main()
