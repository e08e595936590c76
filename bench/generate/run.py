#!/usr/bin/env python3
"""Generation on the CPU: tfc's generation API (tfc.Generator) against
transformers' generate() on PyTorch, tokens per second, measured in one run.

  bash bench/minilm/setup_peers.sh          # once: bench/.venv
  bench/.venv/bin/python bench/generate/run.py [--models base,marian]
      [--threads 2] [--rounds 4] [--runs 3] [--batch 1]

Models (random weights from transformers' own initialisation, seed 0,
written once under bench/generate/work/, nothing downloaded):
  base    the base model of "Attention Is All You Need" as a Marian config
          (6 + 6 layers, d_model 512, 8 heads, d_ff 2048, sinusoidal
          positions, shared embeddings tied to the output projection,
          vocabulary 37000): beam search, 4 beams;
  marian  opus-mt-en-de's shape (the same body, vocabulary 58101): greedy.
Each generates --new-tokens (32) new tokens after --src-len (32) source
tokens; the models' generation_config.json sets min_new_tokens to
--new-tokens, which both sides apply, so every run does the same steps. The token ids both systems return are compared (they must be
identical: tfc's greedy and beam search are transformers').

Each round runs every system once as a fresh process (rotated order): one
warm-up generate(), then --runs timed ones; a system's figure is the median
of its round medians. tokens/s = batch x new tokens / seconds (end to end:
encoder, every decoder step, the search in Python). tfc's builds are
compiled before the rounds into a kept cache (compile time is reported
apart). Both sides use --threads threads (torch.set_num_threads; tfc's
--model-threads).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
WORK = os.path.join(HERE, "work")

MODELS = {
    "base": dict(vocab=37000, beams=4),
    "marian": dict(vocab=58101, beams=1),
}


def make_model(name):
    d = os.path.join(WORK, name)
    if os.path.exists(os.path.join(d, "model.safetensors")):
        return d
    import torch
    from transformers import GenerationConfig, MarianConfig, MarianMTModel
    spec = MODELS[name]
    torch.manual_seed(0)
    cfg = MarianConfig(
        vocab_size=spec["vocab"], d_model=512, encoder_layers=6,
        decoder_layers=6, encoder_attention_heads=8,
        decoder_attention_heads=8, encoder_ffn_dim=2048,
        decoder_ffn_dim=2048, max_position_embeddings=512,
        scale_embedding=True, pad_token_id=spec["vocab"] - 1,
        eos_token_id=0, decoder_start_token_id=spec["vocab"] - 1,
        share_encoder_decoder_embeddings=True, tie_word_embeddings=True)
    model = MarianMTModel(cfg).eval()
    model.save_pretrained(d)
    GenerationConfig(
        decoder_start_token_id=cfg.decoder_start_token_id,
        eos_token_id=cfg.eos_token_id, pad_token_id=cfg.pad_token_id,
        num_beams=spec["beams"]).save_pretrained(d)
    return d


def source(args, vocab):
    rng = np.random.default_rng(1)
    ids = rng.integers(1, vocab - 1, (args.batch, args.src_len))
    ids[:, -1] = 0  # the source ends with EOS, as a tokenizer writes it
    return ids.astype(np.int64)


def peer(args):
    """One system, one process: prints a JSON line."""
    spec = MODELS[args.model]
    d = os.path.join(WORK, args.model)
    ids = source(args, spec["vocab"])
    settings = dict(max_new_tokens=args.new_tokens, num_beams=spec["beams"])
    if args.system == "transformers":
        import torch
        from transformers import MarianMTModel
        torch.set_num_threads(args.threads)
        model = MarianMTModel.from_pretrained(d).eval()
        tids = torch.from_numpy(ids)

        def run():
            with torch.inference_mode():
                return model.generate(
                    tids, attention_mask=torch.ones_like(tids),
                    **settings).numpy()
    else:
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import tfc
        gen = tfc.Generator(d, args.new_tokens + 1, batch=args.batch *
                            spec["beams"], threads=args.threads,
                            cache_dir=os.path.join(WORK, "cache"))

        def run():
            return gen.generate(ids, np.ones_like(ids), **settings)
    start = time.perf_counter()
    out = run()  # warm-up (tfc: loads the kept builds)
    first = time.perf_counter() - start
    times = []
    for _ in range(args.runs):
        start = time.perf_counter()
        out = run()
        times.append(time.perf_counter() - start)
    print(json.dumps(dict(system=args.system, first=first, times=times,
                          tokens=out.tolist())))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="base,marian")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--src-len", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--peer", choices=["tfc", "transformers"])
    p.add_argument("--model")
    args = p.parse_args()
    if args.peer:
        args.system = args.peer
        return peer(args)
    os.makedirs(WORK, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    common = ["--threads", str(args.threads), "--runs", str(args.runs),
              "--batch", str(args.batch), "--src-len", str(args.src_len),
              "--new-tokens", str(args.new_tokens)]
    systems = ["tfc", "transformers"]
    for name in args.models.split(","):
        gc_path = os.path.join(make_model(name), "generation_config.json")
        with open(gc_path) as f:
            gc = json.load(f)
        gc["min_new_tokens"] = args.new_tokens
        gc.pop("max_length", None)
        with open(gc_path, "w") as f:
            json.dump(gc, f, indent=2)
        # tfc's builds, compiled into the kept cache before the rounds.
        start = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--peer", "tfc", "--model",
                        name] + common[:2] + ["--runs", "0"] + common[4:],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        compile_s = time.perf_counter() - start
        medians = {s: [] for s in systems}
        tokens = {}
        for r in range(args.rounds):
            order = systems[r % 2:] + systems[:r % 2]
            for s in order:
                out = subprocess.run(
                    [sys.executable, __file__, "--peer", s, "--model", name]
                    + common, env=env, check=True, capture_output=True,
                    text=True).stdout
                res = json.loads(out.strip().splitlines()[-1])
                medians[s].append(statistics.median(res["times"]))
                tokens[s] = res["tokens"]
        same = tokens["tfc"] == tokens["transformers"]
        new = args.batch * args.new_tokens
        spec = MODELS[name]
        print("%s: %s, batch %d, %d source tokens, %d new tokens, %d "
              "threads, %d rounds x %d runs" % (
                  name, "beam search, %d beams" % spec["beams"]
                  if spec["beams"] > 1 else "greedy", args.batch,
                  args.src_len, args.new_tokens, args.threads, args.rounds,
                  args.runs))
        rate = {}
        for s in systems:
            t = statistics.median(medians[s])
            rate[s] = new / t
            print("  %-13s %8.1f ms  %7.1f tokens/s  (round medians: %s)" % (
                s, t * 1e3, rate[s], ", ".join(
                    "%.0f" % (m * 1e3) for m in medians[s])))
        print("  tfc / transformers: %.2fx; token ids identical: %s; tfc's "
              "builds compiled in %.1f s (first process)" % (
                  rate["tfc"] / rate["transformers"], same, compile_s))


if __name__ == "__main__":
    main()
