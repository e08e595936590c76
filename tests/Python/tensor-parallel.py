"""The Python API on tensor-parallel builds (python/tfc/parallel.py,
docs/tensor-parallel.md): a random LLaMA with grouped-query attention built
for 2 ranks and run by `mpirun -np 2 python3` through tfc.Model gives, on
every rank, the whole outputs of the 1-rank build within 1e-5 (norm-wise
relative) from the whole inputs, a prefill and a decode step; with
gather=False each rank's keys and values are exactly its heads of the
whole, and a decode step takes the cache whole or as the rank's parts
alike; a Context runs as its model; Model.time runs; in bf16 too (its bits
gathered as bf16, within one unit of its roundoff). tfc.Generator with
tensor_parallel=2 generates the 1-rank Generator's tokens (greedy, each
decision clear of a near-tie, and beam search) on both ranks, and `mpirun
-np 2 python3 -m tfc.generate --tensor-parallel 2` prints them once (an
error once, as one line). The same under mpi4py, imported before tfc (MPI
initialised by mpi4py, not finalised by the runtime: mpi4py's own
collective works after the model is closed, and the job exits cleanly).
Errors, one line each: the 2-rank build loaded by one process (and with
torchrun's WORLD_SIZE=2), a cache of neither the whole nor the rank's
part's heads, sampling without a seed on a split Generator.

usage: tensor-parallel.py BINDIR WORKDIR [SEED]
       tensor-parallel.py --rank WORKDIR [--mpi4py]   (each MPI rank)
"""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
INTEGRATION = os.path.join(ROOT, "tests", "Integration", "CPU")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "pylib"))
MPI = None
if sys.argv[1:3] and sys.argv[1] == "--rank" and "--mpi4py" in sys.argv:
    from mpi4py import MPI  # noqa: E402  (before tfc: it initialises MPI)
import tfc  # noqa: E402

BATCH, SEQ, NEW = 2, 9, 6
MAX_LENGTH = SEQ + NEW
# A near-tie between the best two logits of a greedy decision could let
# the 2-rank build's rounding pick the other token: each decision of the
# 1-rank build must be clear of one by this much.
MARGIN = 1e-3


def integration():
    """tests/Integration/CPU/tensor-parallel.py (its LLaMA, mpirun)."""
    spec = importlib.util.spec_from_file_location(
        "tensor_parallel", os.path.join(INTEGRATION, "tensor-parallel.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rank_main(work, mpi4py):
    """One rank's runs of the 2-rank builds; its results go to
    rank<r>[_mpi4py].npz and .json for the driver to check."""
    inp = np.load(os.path.join(work, "inputs.npz"))
    weights = os.path.join(work, "llama", "model.safetensors")
    res, info = {}, {}
    if mpi4py:
        info["initialized_before"] = bool(MPI.Is_initialized())
    m = tfc.Model(os.path.join(work, "prefill_tp2.so"), weights=weights)
    rank = info["rank"] = m.rank
    info["ranks"] = m.ranks
    info["weight_bytes"] = m.weight_bytes
    for k, o in enumerate(m.run(inp["ids"], inp["mask"])):
        res["prefill%d" % k] = o
    for k, o in enumerate(m.run(inp["ids"], inp["mask"], gather=False)):
        res["prefill_part%d" % k] = o
    info["time"] = m.time(inp["ids"], inp["mask"], runs=2)
    with m.context() as c:
        for k, o in enumerate(c.run(inp["ids"], inp["mask"])):
            res["context%d" % k] = o
    m.close()
    if not mpi4py:
        with tfc.Model(os.path.join(work, "bf16_tp2.so"),
                       weights=weights) as b:
            for tag, gather in (("bf16_", True), ("bf16_part", False)):
                for k, o in enumerate(b.run(inp["ids"], inp["mask"],
                                            gather=gather)):
                    res["%s%d" % (tag, k)] = o
        d = tfc.Model(os.path.join(work, "decode_tp2.so"), weights=weights)
        past = [inp["past%d" % k] for k in range(4)]
        half = past[0].shape[1] // 2
        mine = [p[:, rank * half:(rank + 1) * half] for p in past]
        step = [inp["step_ids"], inp["step_mask"]]
        for tag, cache, gather in (("decode", past, True),
                                   ("decode_part", past, False),
                                   ("decode_part_in", mine, False)):
            for k, o in enumerate(d.run(*step, *cache, gather=gather)):
                res["%s%d" % (tag, k)] = o
        try:
            d.run(*step, np.concatenate([past[0], mine[0]], 1), *past[1:])
            info["three_heads"] = "no error"
        except tfc.Error as e:
            info["three_heads"] = e.message
        d.close()
        g = tfc.Generator(os.path.join(work, "llama"), MAX_LENGTH,
                          batch=BATCH, tensor_parallel=2)
        res["greedy"] = g.generate(inp["prompt"], inp["prompt_mask"],
                                   max_new_tokens=NEW)
        res["beam"] = g.generate(inp["prompt"], inp["prompt_mask"],
                                 max_new_tokens=NEW, num_beams=3)
        try:
            g.generate(inp["prompt"], inp["prompt_mask"], max_new_tokens=2,
                       do_sample=True)
            info["unseeded"] = "no error"
        except tfc.Error as e:
            info["unseeded"] = e.message
        g.close()
    else:
        info["finalized_after"] = bool(MPI.Is_finalized())
        info["mpi4py_sum"] = MPI.COMM_WORLD.allreduce(rank + 1)
    stem = os.path.join(work, "rank%d%s" % (rank, "_mpi4py" if mpi4py
                                             else ""))
    np.savez(stem + ".npz", **res)
    with open(stem + ".json", "w") as f:
        json.dump(info, f)


def python_with_mpi4py():
    """A python3 that imports mpi4py and numpy: this one, else Debian's
    (Debian's python3-mpi4py installs into /usr/bin/python3's)."""
    for python in (sys.executable, "/usr/bin/python3"):
        try:
            subprocess.run([python, "-c", "import mpi4py, numpy"],
                           check=True, capture_output=True)
            return python
        except (OSError, subprocess.CalledProcessError):
            continue
    return None


def compile_llama(h, name, flags):
    """The LLaMA's build of `flags` at BATCH, logits out, as `name`.so."""
    lib = h.path(name + ".so")
    subprocess.run([h.compile, "--hf", h.path("llama"), "--batch",
                    str(BATCH), "--output=logits", "-o", lib] + flags,
                   check=True, capture_output=True)
    return lib


def run_1rank(h, name, flags, *inputs):
    lib = compile_llama(h, name, flags)
    with tfc.Model(lib, weights=h.path("llama/model.safetensors")) as m:
        return m.run(*inputs)


def ranks_run(h, tp, label, python, extra=()):
    """`mpirun -np 2 python --rank WORKDIR`; True when both exit 0 with
    nothing on stderr."""
    done = subprocess.run(tp.MPIRUN + ["-np", "2", python, __file__,
                                       "--rank", h.workdir] + list(extra),
                          capture_output=True, text=True, timeout=120)
    err = done.stderr.strip().splitlines()
    ok = done.returncode == 0 and not err
    h.expect("%s: both ranks exit 0, stderr empty (%s)" % (
        label, err[-1] if err else ""), ok)
    return ok


def load_rank(h, r, suffix=""):
    stem = h.path("rank%d%s" % (r, suffix))
    with open(stem + ".json") as f:
        return dict(np.load(stem + ".npz")), json.load(f)


def heads(a, r):
    half = a.shape[1] // 2
    return a[:, r * half:(r + 1) * half]


def check_prefill(h, label, got, info, one, r):
    h.expect("%s rank %d: rank %d of %d" % (label, r, info["rank"],
                                            info["ranks"]),
             info["rank"] == r and info["ranks"] == 2)
    for k, want in enumerate(one):
        h.expect_close("%s rank %d: whole output %d" % (label, r, k),
                       got["prefill%d" % k], want.astype(np.float64), 1e-5)
    parts = [np.array_equal(got["prefill_part%d" % k],
                            heads(got["prefill%d" % k], r))
             for k in range(1, len(one))]
    h.expect("%s rank %d: gather=False keys and values are the rank's heads "
             "of the whole, the logits whole (%s)" % (label, r, parts),
             all(parts) and np.array_equal(got["prefill_part0"],
                                           got["prefill0"]))
    same = [np.array_equal(got["context%d" % k], got["prefill%d" % k])
            for k in range(len(one))]
    h.expect("%s rank %d: a Context's run: the model's whole outputs (%s)" % (
        label, r, same), all(same))
    h.expect("%s rank %d: Model.time on the whole inputs (%s ms)" % (
        label, r, info["time"]), len(info["time"]) == 2 and
        all(t > 0 for t in info["time"]))


def greedy_margin(h, seqs, mask):
    """The smallest gap between the best two logits at the greedy
    decisions that produced `seqs` (the 1-rank prefill build of the whole
    sequence, at the Generator's positions)."""
    full_mask = np.concatenate([mask, np.ones((BATCH, NEW), np.int64)], 1)
    pos = np.where(full_mask == 0, 0, np.cumsum(full_mask, -1) - 1)
    logits, = run_1rank(h, "full", ["--seq-len", str(MAX_LENGTH),
                                    "--position-ids"], seqs, full_mask, pos)
    top = np.sort(logits[:, SEQ - 1:MAX_LENGTH - 1], -1)
    return float((top[..., -1] - top[..., -2]).min())


def start(seed):
    """The driver's Harness (arguments BINDIR WORKDIR [SEED], `seed` by
    default) and random generator; tfc.compile and tfc.Generator set to
    BINDIR's tfc-compile and its runtime."""
    from tfc_testing.harness import Harness
    h = Harness(sys.argv[1], sys.argv[2])
    seed = h.seed = int(sys.argv[3]) if len(sys.argv) > 3 else seed
    print("seed", seed)
    h.use_build()
    return h, np.random.default_rng(seed)


def main():
    if sys.argv[1] == "--rank":
        return rank_main(sys.argv[2], "--mpi4py" in sys.argv)
    from tfc_testing.arrays import random_tokens
    tp = integration()
    # A fixed seed by default, whose greedy decisions are clear of a tie.
    h, rng = start(5)
    cfg = tp.LLAMA
    tp.llama.write_model(h.path("llama"), rng, cfg)
    ids, mask = random_tokens(rng, cfg["vocab_size"], BATCH, SEQ, padding=3)
    mask = mask[:, ::-1].copy()  # left padding, as a generated prompt's
    prefill = ["--seq-len", str(SEQ), "--kv-cache"]
    decode = ["--seq-len", "1", "--past-len", str(SEQ)]
    one = run_1rank(h, "prefill_tp1", prefill, ids, mask)
    step_ids = rng.integers(0, cfg["vocab_size"], (BATCH, 1))
    step_mask = np.concatenate([mask, np.ones((BATCH, 1), np.int64)], 1)
    one_step = run_1rank(h, "decode_tp1", decode, step_ids, step_mask,
                         *one[1:])
    bf16 = prefill + ["--dtype=bf16"]
    one_bf16 = run_1rank(h, "bf16_tp1", bf16, ids, mask)
    with tfc.Generator(h.path("llama"), MAX_LENGTH, batch=BATCH) as g:
        greedy = g.generate(ids, mask, max_new_tokens=NEW)
        beam = g.generate(ids, mask, max_new_tokens=NEW, num_beams=3)
    gap = greedy_margin(h, greedy, mask)
    h.expect("the 1-rank greedy decisions' smallest margin %.2g > %g" % (
        gap, MARGIN), gap > MARGIN)
    for name, flags in (("prefill", prefill), ("decode", decode),
                        ("bf16", bf16)):
        compile_llama(h, name + "_tp2", flags + ["--tensor-parallel=2"])
    np.savez(h.path("inputs.npz"), ids=ids, mask=mask, step_ids=step_ids,
             step_mask=step_mask, prompt=ids, prompt_mask=mask,
             **{"past%d" % k: p for k, p in enumerate(one[1:])})
    if ranks_run(h, tp, "mpirun -np 2 python3", sys.executable):
        check_ranks(h, one, one_step, one_bf16, greedy, beam)
    python = python_with_mpi4py()
    h.expect("a python3 with mpi4py (pip install mpi4py: "
             "scripts/setup.sh)", python is not None)
    if python and ranks_run(h, tp, "mpirun -np 2 python3, mpi4py imported "
                            "first", python, ["--mpi4py"]):
        for r in range(2):
            got, info = load_rank(h, r, "_mpi4py")
            check_prefill(h, "mpi4py", got, info, one, r)
            h.expect("mpi4py rank %d: MPI initialised by mpi4py, not "
                     "finalised by the runtime after the model closed, "
                     "mpi4py's allreduce works (%s)" % (r, info),
                     info["initialized_before"] and
                     not info["finalized_after"] and info["mpi4py_sum"] == 3)
    check_cli(h, tp, greedy)
    check_errors(h)
    h.finish()


def check_ranks(h, one, one_step, one_bf16, greedy, beam):
    runs = [load_rank(h, r) for r in range(2)]
    for r, (got, info) in enumerate(runs):
        check_prefill(h, "run", got, info, one, r)
        # bf16 (its bits in uint16; the logits f32): the parts summed in
        # f32 and rounded once, but in another order than one rank's, which
        # can round a value the other way: within bf16's model tolerance
        # (10 units of its roundoff) of the 1-rank build.
        for k, want in enumerate(one_bf16):
            two = got["bf16_%d" % k]
            if want.dtype == np.uint16:
                two, want = tfc.bf16_to_float32(two), \
                    tfc.bf16_to_float32(want)
            h.expect_close("bf16 rank %d: whole output %d (%s)" % (
                r, k, "f32" if k == 0 else "bf16"), two,
                want.astype(np.float64), 10 * 2.0**-8)
        parts = [np.array_equal(got["bf16_part%d" % k],
                                heads(got["bf16_%d" % k], r))
                 for k in range(1, len(one_bf16))]
        h.expect("bf16 rank %d: gather=False keys and values are the rank's "
                 "heads of the whole (%s)" % (r, parts), all(parts))
        for k, want in enumerate(one_step):
            h.expect_close("decode rank %d: whole output %d" % (r, k),
                           got["decode%d" % k], want.astype(np.float64), 1e-5)
        same = [np.array_equal(got["decode_part_in%d" % k],
                               got["decode_part%d" % k]) and
                np.array_equal(got["decode_part%d" % k],
                               heads(got["decode%d" % k], r) if k else
                               got["decode%d" % k])
                for k in range(len(one_step))]
        h.expect("decode rank %d: the cache given as the rank's parts or "
                 "whole, gather=False: the rank's heads of the whole "
                 "outputs (%s)" % (r, same), all(same))
        for name, want in (("greedy", greedy), ("beam search", beam)):
            key = "greedy" if name == "greedy" else "beam"
            h.expect("Generator(tensor_parallel=2) rank %d, %s: %s as the "
                     "1-rank Generator's %s" % (r, name, got[key].tolist(),
                                                want.tolist()),
                     np.array_equal(got[key], want))
        h.expect("rank %d: a cache of 3 heads, one line: %s" % (
            r, info["three_heads"]),
            "input 2 'past_key_values.0.key': expected the whole tensor, "
            "axis 1 of 2 (2 ranks' parts of 1), got f32 [2, 3, 9, 12]"
            in info["three_heads"] and "\n" not in info["three_heads"])
        h.expect("rank %d: sampling without a seed, one line: %s" % (
            r, info["unseeded"]), info["unseeded"] == (
                "tfc.generate: do_sample on builds split across 2 ranks "
                "needs a seed (every rank draws the same tokens)"))
    bound = [info["weight_bytes"] for _, info in runs]
    h.expect("each rank binds the same bytes of weights, fewer than all "
             "(%s of %d)" % (bound, os.path.getsize(h.path(
                 "llama/model.safetensors"))),
             bound[0] == bound[1] and 0 < bound[0] < os.path.getsize(
                 h.path("llama/model.safetensors")))


def tfc_generate(h, tp, greedy, ranks):
    """`mpirun -np 2 python3 -m tfc.generate --tensor-parallel RANKS` on
    the first prompt."""
    return subprocess.run(
        tp.MPIRUN + ["-x", "PYTHONPATH", "-np", "2", sys.executable, "-m",
                     "tfc.generate", h.path("llama"), "--tensor-parallel",
                     str(ranks), "--ids",
                     ",".join(str(int(t)) for t in greedy[0, :SEQ]),
                     "--max-new-tokens", str(NEW)],
        capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")))


def check_cli(h, tp, greedy):
    done = tfc_generate(h, tp, greedy, 2)
    # The first row has no padding (random_tokens pads the second).
    want = ",".join(str(int(t)) for t in greedy[0])
    h.expect("mpirun -np 2 tfc-generate --tensor-parallel 2: rank 0 prints "
             "the 1-rank tokens once (%r, %s)" % (
                 done.stdout.strip(), done.stderr.strip()[-200:]),
             done.returncode == 0 and done.stdout.splitlines() == [want])
    # Both ranks fail alike; rank 0 says it, once.
    done = tfc_generate(h, tp, greedy, 4)
    err = done.stderr.strip().splitlines()
    h.expect("mpirun -np 2 tfc-generate --tensor-parallel 4: exit 1, one "
             "line: %s" % err, done.returncode == 1 and len(err) == 1 and
             err[0].startswith("tfc-generate: error: tfc.Generator: cannot "
                               "build ") and
             "--tensor-parallel=4: 4 ranks do not divide num_key_value_heads "
             "(2)" in err[0])


def check_errors(h):
    lib = h.path("prefill_tp2.so")
    for env, extra in (({}, ""), ({"WORLD_SIZE": "2", "RANK": "0"},
                                  " (WORLD_SIZE=2 is torchrun's and makes no "
                                  "MPI job: tfc's ranks are Open MPI's)")):
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            tfc.Model(lib)
            message = "no error"
        except tfc.Error as e:
            message = e.message
        finally:
            for k, v in saved.items():
                if v is None:
                    del os.environ[k]
                else:
                    os.environ[k] = v
        h.expect("the 2-rank build loaded by one process%s, one line: %s" % (
            " with WORLD_SIZE=2" if env else "", message),
            message == "model %s: built for 2 ranks (tfc-compile "
            "--tensor-parallel=2) and run as a single process: run it as "
            "mpirun -np 2 python3 ...%s" % (lib, extra))


if __name__ == "__main__":
    main()
