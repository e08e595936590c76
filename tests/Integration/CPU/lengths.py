"""Models built for several sequence lengths (tfc-compile --hf --seq-len
4,8,13): one library, run by tfc-run at any length up to the longest (the
runtime takes the shortest built length that holds it, pads the inputs with
zeros and cuts the outputs), against the float64 reference at that length:
a LLaMA's last hidden state and its KV cache (prefill with --kv-cache; a
chunk after 5 past tokens, whose attention_mask covers past + new tokens),
and a RoBERTa's sentence embeddings (an output without a sequence axis),
with a padded batch row at every length. Lengths below, at and between the
built ones, fused and unfused. tfc-run refuses, in one line with exit
status 1, inputs longer than the longest build and inputs that disagree on
the length.

usage: lengths.py BINDIR WORKDIR [SEED]
"""

import json
import os
import subprocess
import sys

import numpy as np

import llama
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "pylib"))
from tfc_testing import reference, safetensors_file  # noqa: E402
from tfc_testing.arrays import random_tokens  # noqa: E402
from tfc_testing.harness import start  # noqa: E402

INPUTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                      "Importer", "Inputs")

BATCH = 2
BUILT = (4, 8, 13)
# Below, at and between the built lengths, and the longest.
LENGTHS = (1, 3, 4, 6, 8, 11, 13)
PAST = 5


def build(h, name, model, fused, flags=(), batches=(BATCH,), lengths=BUILT):
    """tfc-compile --hf MODEL --batch 2 --seq-len 4,8,13 (by default);
    returns the library."""
    lib = h.path(name + (".fused" if fused else ".unfused") + ".so")
    cmd = [h.compile, "--hf", model, "--batch",
           ",".join(str(b) for b in batches), "--seq-len",
           ",".join(str(n) for n in lengths), "-o", lib] + list(flags)
    if not fused:
        cmd.append("--no-fusion")
    summary = subprocess.run(cmd, check=True, stderr=subprocess.PIPE,
                             text=True).stderr.strip()
    if fused:
        print(summary)
    return lib


def tokens(rng, vocab, n):
    """[BATCH, n] ids and a mask whose second row ends in padding (half of
    it, rounded down) when n > 1."""
    return random_tokens(rng, vocab, BATCH, n, n // 2)


def expect_cache(h, label, got, kv):
    """The outputs after the hidden state, each layer's keys and values of
    past + new tokens, against the reference's `kv`."""
    cache = np.stack([np.stack(pair) for pair in kv])
    present = np.stack([np.stack(got[1 + 2 * l:3 + 2 * l])
                        for l in range(len(kv))])
    h.expect(label + ": keys and values of past + new tokens",
             present.shape == cache.shape)
    if present.shape == cache.shape:
        h.expect_close(label + " keys and values", present, cache, 1e-4)


def check_llama(h, rng):
    cfg = llama.CFG
    model = h.path("llama")
    w = llama.write_model(model, rng, cfg)
    for fused in (True, False):
        tag = "fused" if fused else "unfused"
        lib = build(h, "llama", model, fused)
        for n in LENGTHS:
            ids, mask = tokens(rng, cfg["vocab_size"], n)
            out = h.run_hf(lib, model, [ids, mask])
            h.expect("llama %s length %d: hidden state [%d, %d, %d]" %
                     (tag, n, BATCH, n, cfg["hidden_size"]),
                     out.shape == (BATCH, n, cfg["hidden_size"]))
            h.expect_close("llama %s length %d hidden state" % (tag, n), out,
                           llama.reference(cfg, w, ids, mask), 1e-4)
    # The KV cache: prefill returns each layer's keys and values of the n
    # tokens; a chunk after PAST tokens takes theirs and returns all.
    layers = cfg["num_hidden_layers"]
    for past in (0, PAST):
        flags = ["--kv-cache"] if past == 0 else ["--past-len", str(past)]
        lib = build(h, "llama_kv%d" % past, model, True, flags)
        for n in (3, 8, 11):
            ids, mask = tokens(rng, cfg["vocab_size"], past + n)
            kv = []
            ref = llama.reference(cfg, w, ids, mask, kv)
            inputs = [ids[:, past:], mask]
            for k, v in kv if past else ():
                inputs += [k[:, :, :past].astype(np.float32),
                           v[:, :, :past].astype(np.float32)]
            got = h.run_hf(lib, model, inputs, 1 + 2 * layers)
            label = "llama past %d length %d" % (past, n)
            h.expect_close(label + " hidden state", got[0], ref[:, past:],
                           1e-4)
            expect_cache(h, label, got, kv)
    return w


def check_roberta(h, rng):
    vocab = 50
    model = h.path("roberta")
    subprocess.run([sys.executable, os.path.join(INPUTS, "make_fake_bert.py"),
                    model, "--family", "roberta", "--layers", "2", "--hidden",
                    "32", "--heads", "4", "--inter", "48", "--vocab",
                    str(vocab), "--max-pos", str(BUILT[-1] + 2), "--seed",
                    str(int(rng.integers(1 << 30)))], check=True)
    with open(os.path.join(model, "config.json")) as f:
        cfg = json.load(f)
    w = safetensors_file.read(model)
    for fused in (True, False):
        tag = "fused" if fused else "unfused"
        lib = build(h, "roberta", model, fused)
        for n in LENGTHS:
            ids, mask = tokens(rng, vocab, n)
            out = h.run_hf(lib, model, [ids, mask])
            ref = reference.bert(cfg, w, "", ids, mask)
            h.expect("roberta %s length %d: embeddings [%d, 32]" %
                     (tag, n, BATCH), out.shape == (BATCH, 32))
            h.expect_close("roberta %s length %d sentence embeddings" %
                           (tag, n), out, ref, 1e-5)


def check_batches(h, rng, w):
    """Batch sizes and lengths together: the LLaMA with 5 past tokens built
    for batch sizes 1 and 2 and lengths 4 and 8 (every input and output has
    a batch axis, the KV cache's too), run at batch sizes 1 to 5 (beyond 2
    in slices) and lengths 3 and 8; and the RoBERTa built for batch sizes 1
    and 2 at one length (its embeddings: a batch axis, no sequence axis).
    `w`: the LLaMA's weights (check_llama's)."""
    cfg = llama.CFG
    layers = cfg["num_hidden_layers"]
    model = h.path("llama")
    lib = build(h, "llama_batches", model, True, ["--past-len", str(PAST)],
                batches=(1, 2), lengths=(4, 8))
    for b, n in ((1, 3), (2, 8), (3, 3), (5, 8), (4, 1)):
        ids, mask = random_tokens(rng, cfg["vocab_size"], b, PAST + n,
                                  (PAST + n) // 2 if b > 1 else 0)
        kv = []
        ref = llama.reference(cfg, w, ids, mask, kv)
        inputs = [ids[:, PAST:], mask]
        for k, v in kv:
            inputs += [k[:, :, :PAST].astype(np.float32),
                       v[:, :, :PAST].astype(np.float32)]
        got = h.run_hf(lib, model, inputs, 1 + 2 * layers)
        label = "llama batch %d length %d" % (b, n)
        h.expect(label + ": hidden state [%d, %d, %d]" %
                 (b, n, cfg["hidden_size"]),
                 got[0].shape == (b, n, cfg["hidden_size"]))
        h.expect_close(label + " hidden state", got[0], ref[:, PAST:], 1e-4)
        expect_cache(h, label, got, kv)

    model = h.path("roberta")
    with open(os.path.join(model, "config.json")) as f:
        cfg = json.load(f)
    w = safetensors_file.read(model)
    lib = build(h, "roberta_batches", model, True, batches=(1, 2),
                lengths=(8,))
    for b in (1, 2, 3):
        ids, mask = random_tokens(rng, cfg["vocab_size"], b, 8,
                                  4 if b > 1 else 0)
        out = h.run_hf(lib, model, [ids, mask])
        ref = reference.bert(cfg, w, "", ids, mask)
        h.expect("roberta batch %d: embeddings [%d, 32]" % (b, b),
                 out.shape == (b, 32))
        h.expect_close("roberta batch %d sentence embeddings" % b, out, ref,
                       1e-5)


def check_refused(h, rng):
    """One line on stderr naming what is wrong, exit status 1."""
    model = h.path("llama")
    lib = h.path("llama.fused.so")
    vocab = llama.CFG["vocab_size"]
    cases = (
        ("inputs longer than the longest build",
         tokens(rng, vocab, BUILT[-1] + 1), "longest"),
        ("inputs that disagree on the length",
         (tokens(rng, vocab, 6)[0], tokens(rng, vocab, 7)[1]), "input"),
    )
    for label, inputs, word in cases:
        args, _ = h.run_args(lib, model, list(inputs), 1)
        proc = subprocess.run(args, capture_output=True, text=True)
        lines = proc.stderr.strip().splitlines()
        h.expect("tfc-run refuses %s: %s" % (label, proc.stderr.strip()),
                 proc.returncode == 1 and len(lines) == 1 and
                 word in lines[0])


def main():
    h, rng, _ = start(sys.argv[1:])
    w = check_llama(h, rng)
    check_roberta(h, rng)
    check_batches(h, rng, w)
    check_refused(h, rng)
    h.finish()


if __name__ == "__main__":
    main()
