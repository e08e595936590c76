#!/usr/bin/env python3
"""tfc.Generator (python/tfc/generation.py) against transformers'
generate(), token for token: GPT-2, LLaMA, Marian, BART, T5 and T5 v1.1
with random weights (Inputs/record_generate.py writes them as it did
when it recorded Inputs/generate-expected.json), greedy and beam search
(length_penalty 1.0 and 0.6, early_stopping True, False and "never"), a
batch of two with a padded prompt, EOS hit, the generation configs'
processors. The JSON records the smallest margin of any decision
transformers made; each case asserts it exceeds MARGIN, so that no
near-tie can decide a token. Then sampling's distribution (top_k=1 is
greedy, every token in the top-k / top-p set, the first token's
frequencies as its probabilities, seeded runs repeat), `python -m
tfc.generate`, and the one-line errors of bad arguments.

usage: generate-api.py BINDIR WORKDIR
"""

import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(HERE, "Inputs"))
import record_generate as rec  # noqa: E402
import tfc  # noqa: E402
from tfc_testing.harness import Harness  # noqa: E402

# The smallest score gap a decision may have: far above the f32 rounding
# by which tfc's logits and PyTorch's differ.
MARGIN = 1e-3
MAX_LENGTH = 16


def load_expected():
    with open(os.path.join(HERE, "Inputs", "generate-expected.json")) as f:
        return json.load(f)


def check_transformers(h, gens, expected):
    for case in expected["cases"]:
        name, settings = case["model"], case["settings"]
        label = "%s %s" % (name, ", ".join("%s=%s" % kv
                                           for kv in settings.items()))
        h.expect("%s: transformers' smallest decision margin %.2g > %g" % (
            label, case["margin"], MARGIN), case["margin"] > MARGIN)
        got = gens[name].generate(
            np.array(case["input_ids"]), np.array(case["attention_mask"]),
            max_new_tokens=expected["max_new_tokens"], **settings)
        want = np.array(case["expected"])
        same = got.shape == want.shape and np.array_equal(got, want)
        h.expect("%s: %s as transformers'%s" % (
            label, got.tolist(), "" if same else " " + str(want.tolist())),
            same)


def check_sampling(h, gen, case):
    ids = np.array(case["input_ids"])
    mask = np.array(case["attention_mask"])
    greedy = gen.generate(ids, mask, max_new_tokens=6)
    top1 = gen.generate(ids, mask, max_new_tokens=6, do_sample=True, top_k=1,
                        seed=3)
    h.expect("sampling with top_k=1 is greedy search",
             np.array_equal(top1, greedy))
    a = gen.generate(ids, mask, max_new_tokens=6, do_sample=True, seed=7,
                     temperature=1.5)
    b = gen.generate(ids, mask, max_new_tokens=6, do_sample=True, seed=7,
                     temperature=1.5)
    h.expect("the same seed samples the same tokens", np.array_equal(a, b))
    # Every sampled token lies in the top-k (top-p) set of the logits (the
    # model's config has no processors) at temperature 2, the logits
    # recomputed by a prefill build of each prefix; rows after their EOS
    # hold padding.
    eos = rec.MODELS["gpt2"][3]["eos_token_id"]
    for kw, what in (({"top_k": 3}, "top-3"), ({"top_p": 0.8}, "top-p 0.8")):
        inside = True
        draws = []
        for seed in range(4):
            out = gen.generate(ids, mask, max_new_tokens=4, do_sample=True,
                               seed=seed, temperature=2.0,
                               top_k=kw.get("top_k", 0),
                               top_p=kw.get("top_p", 1.0))
            draws.append(out[:, ids.shape[1]:])
            for t in range(ids.shape[1], out.shape[1]):
                logits = prefix_logits(gen, out[:, :t], mask, t) / 2.0
                for r in range(len(out)):
                    if eos not in out[r, ids.shape[1]:t]:
                        inside &= bool(out[r, t] in allowed(logits[r], kw))
        h.expect("sampled tokens lie in the %s set (%s)" % (
            what, np.concatenate(draws, 1).tolist()), inside)
        h.expect("%s: different seeds draw different tokens" % what,
                 any(not np.array_equal(draws[0], d) for d in draws[1:]))


def check_frequencies(h, gen, case, n=400):
    """The first token of n seeded draws (top_k=3, temperature 2) falls on
    each of the three as often as its renormalized probability says,
    within 4 standard deviations."""
    ids = np.array(case["input_ids"])
    mask = np.array(case["attention_mask"])
    draws = np.array([gen.generate(ids, mask, max_new_tokens=1,
                                   do_sample=True, seed=seed, top_k=3,
                                   temperature=2.0)[:, -1]
                      for seed in range(n)])
    logits = prefix_logits(gen, ids, mask, ids.shape[1]) / 2.0
    for r in range(len(ids)):
        top = np.argsort(-logits[r])[:3]
        p = np.exp(logits[r][top] - logits[r][top].max())
        p /= p.sum()
        freq = np.array([(draws[:, r] == t).mean() for t in top])
        sigma = np.sqrt(p * (1 - p) / n)
        h.expect("row %d: %d draws of the first token at top_k=3: "
                 "frequencies %s, probabilities %s" % (
                     r, n, np.round(freq, 3).tolist(),
                     np.round(p, 3).tolist()),
                 np.all(np.abs(freq - p) <= 4 * sigma) and
                 freq.sum() == 1.0)


def prefix_logits(gen, ids, prompt_mask, t):
    """The logits after ids [B, t] (prompt then generated), from a prefill
    build of that length."""
    mask = np.concatenate([prompt_mask, np.ones(
        (len(ids), t - prompt_mask.shape[1]), np.int64)], 1)
    pos = np.where(mask == 0, 0, np.cumsum(mask, -1) - 1)
    m = gen._build(len(ids), t, ["--kv-cache", "--position-ids",
                                 "--output=logits"])
    return m.run(ids, mask, pos)[0][:, -1].astype(np.float64)


def allowed(logits, kw):
    """The tokens top-k or top-p (transformers' TopPLogitsWarper: those
    whose ascending cumulative probability exceeds 1 - top_p) keep, the
    edge widened by 1e-4 for f32 rounding."""
    if "top_k" in kw:
        return set(np.argsort(-logits)[:kw["top_k"]].tolist())
    p = np.exp(logits - logits.max())
    p /= p.sum()
    order = np.argsort(logits)
    keep = np.cumsum(p[order]) > 1 - kw["top_p"] - 1e-4
    keep[-1] = True
    return set(order[keep].tolist())


def check_cli(h, gen, model, case, work):
    """python -m tfc.generate on the batch (.npy in and out) and on its
    first prompt (a comma list), and a bad flag."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    files = {n: os.path.join(work, n + ".npy")
             for n in ("ids", "mask", "out")}
    np.save(files["ids"], np.array(case["input_ids"]))
    np.save(files["mask"], np.array(case["attention_mask"]))
    s = case["settings"]
    cmd = [sys.executable, "-m", "tfc.generate", model, "--max-new-tokens",
           "8", "--num-beams", "4", "--length-penalty",
           str(s["length_penalty"]), "--early-stopping",
           str(s["early_stopping"]).lower(), "--max-length", str(MAX_LENGTH),
           "--cache-dir", os.path.join(work, "builds"), "--device", "cpu"]
    done = subprocess.run(cmd + ["--ids", files["ids"], "--attention-mask",
                                 files["mask"], "--output", files["out"]],
                          env=env, capture_output=True, text=True)
    h.expect("tfc.generate --ids FILE.npy --output FILE.npy: as "
             "transformers' %s" % done.stderr.strip()[-300:],
             done.returncode == 0 and os.path.exists(files["out"]) and
             np.load(files["out"]).tolist() == case["expected"])
    prompt = case["input_ids"][0]
    done = subprocess.run(cmd + ["--ids", ",".join(map(str, prompt))],
                          env=env, capture_output=True, text=True)
    want = gen.generate(np.array([prompt]), max_new_tokens=8, num_beams=4,
                        length_penalty=s["length_penalty"],
                        early_stopping=s["early_stopping"])
    h.expect("tfc.generate --ids %s prints %s: as tfc.Generator's" % (
        ",".join(map(str, prompt)), done.stdout.strip()),
        done.returncode == 0 and
        done.stdout.strip() == ",".join(map(str, want[0])))
    for flags, needle in ((["--ids", "1,2", "--num-beams", "0"],
                           "num_beams 0"),
                          (["--ids", "1,x"], "--ids '1,x': a comma list"),
                          (["--ids", "1,2", "--early-stopping", "soon"],
                           "--early-stopping: 'soon': true, false"),
                          (["--ids", "1,2", "--device", "tpu"],
                           "--device: invalid choice: 'tpu'")):
        done = subprocess.run(cmd + flags, env=env, capture_output=True,
                              text=True)
        err = done.stderr.strip()
        h.expect("tfc.generate %s: exit 1, one line: %s" % (
            " ".join(flags), err), done.returncode == 1 and
            len(err.splitlines()) == 1 and needle in err)


def check_errors(h, gens, case, work):
    ids = np.array(case["input_ids"])

    def refused(label, fn, needle):
        try:
            fn()
        except tfc.Error as e:
            msg = str(e)
            h.expect("%s: %s" % (label, msg), needle in msg and
                     len(msg.splitlines()) == 1)
            return
        h.expect("%s: refused" % label, False)

    g = gens["gpt2"]
    refused("num_beams 0", lambda: g.generate(ids, max_new_tokens=3,
                                              num_beams=0), "num_beams 0")
    refused("max_new_tokens beyond the cache",
            lambda: g.generate(ids, max_new_tokens=MAX_LENGTH),
            "beyond this Generator's max_length %d" % MAX_LENGTH)
    refused("beam sampling", lambda: g.generate(
        ids, max_new_tokens=3, num_beams=2, do_sample=True),
        "beam sampling")
    refused("attention_mask of another shape", lambda: g.generate(
        ids, np.ones((2, 3)), max_new_tokens=3), "attention_mask [2, 3]")
    for kw, needle in (({"max_new_tokens": 0}, "max_new_tokens 0"),
                       ({"max_new_tokens": 3, "early_stopping": "soon"},
                        "early_stopping 'soon'"),
                       ({"max_new_tokens": 3, "do_sample": True,
                         "temperature": 0.0}, "temperature 0.0")):
        refused(needle, lambda: g.generate(ids, **kw), needle)
    refused("3-D input_ids", lambda: g.generate(ids[None], max_new_tokens=3),
            "input_ids: a [batch, length] array")
    refused("max_length 1", lambda: tfc.Generator(
        os.path.dirname(g.directory) + "/gpt2", 1), "max_length 1")
    refused("a directory without config.json",
            lambda: tfc.Generator(work, MAX_LENGTH), "no config.json")
    # Marian without a decoder start token (nor bos_token_id).
    nostart = os.path.join(work, "marian_nostart")
    shutil.copytree(gens["marian"].directory, nostart)
    with open(os.path.join(nostart, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": 37}, f)
    refused("an encoder-decoder without decoder_start_token_id",
            lambda: tfc.Generator(nostart, MAX_LENGTH).generate(
                ids, max_new_tokens=3), "needs decoder_start_token_id")
    bert = os.path.join(work, "bert")
    subprocess.run([sys.executable, os.path.join(
        ROOT, "tests", "Importer", "Inputs", "make_fake_bert.py"), bert],
        check=True)
    refused("a model without a KV cache (BERT)",
            lambda: tfc.Generator(bert, MAX_LENGTH,
                                  cache_dir=os.path.join(work, "builds")),
            "cannot build")
    gpt = os.path.join(work, "gpt2_ngram")
    rec.gpt2.write_model(gpt, np.random.default_rng(1), rec.gpt2.CFG)
    with open(os.path.join(gpt, "generation_config.json"), "w") as f:
        json.dump({"no_repeat_ngram_size": 3}, f)
    refused("a generation config asking for an unimplemented processor",
            lambda: tfc.Generator(gpt, MAX_LENGTH),
            "sets no_repeat_ngram_size = 3")


def check_top(h):
    """Beam search's top candidates (generation._top, a partition then a
    sort of what it kept) are the first of the stable full sort's, ties to
    the lower index, on random rows with many ties and -inf."""
    from tfc.generation import _ranked, _top
    rng = np.random.default_rng(5)
    bad = 0
    for t in range(600):
        b, m = int(rng.integers(1, 4)), int(rng.integers(1, 400))
        n = int(rng.integers(1, m + 1))
        x = (rng.integers(-4, 4, (b, m)) if t % 2 else
             rng.standard_normal((b, m))).astype(np.float32)
        if t % 3 == 0:
            x[:, rng.integers(0, m, m // 2)] = -np.inf
        bad += not np.array_equal(_top(x, n), _ranked(x)[:, :n])
    h.expect("beam search's partial top-k equals the full stable sort's "
             "prefix (600 random cases, ties and -inf)", bad == 0)


def main():
    work = sys.argv[2]
    h = Harness(sys.argv[1], work)
    h.use_build()
    expected = load_expected()
    print("expected ids written by transformers %s, torch %s" % (
        expected["versions"]["transformers"], expected["versions"]["torch"]))
    dirs = rec.write_models(os.path.join(work, "models"))
    for name, d in dirs.items():
        for f, digest in expected["models"][name]["sha256"].items():
            h.expect("%s/%s is the file transformers ran" % (name, f),
                     rec.sha256(os.path.join(d, f)) == digest)
    builds = os.path.join(work, "builds")
    gens = {name: tfc.Generator(d, MAX_LENGTH, batch=2, cache_dir=builds)
            for name, d in dirs.items()}
    check_transformers(h, gens, expected)
    first = {c["model"]: c for c in expected["cases"]
             if c["settings"]["num_beams"] == 1}
    check_sampling(h, gens["gpt2"], first["gpt2"])
    check_frequencies(h, gens["gpt2"], first["gpt2"])
    beam = [c for c in expected["cases"] if c["model"] == "gpt2" and
            c["settings"]["num_beams"] == 4][0]
    check_cli(h, gens["gpt2"], dirs["gpt2"], beam, work)
    check_errors(h, gens, beam, work)
    check_top(h)
    h.finish()


if __name__ == "__main__":
    main()
