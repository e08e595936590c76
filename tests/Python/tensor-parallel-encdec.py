"""tfc.Generator on split encoder-decoders, and the ranks of an MPI that
mpi4py initialised (docs/tensor-parallel.md, "From Python"): a random
Marian and a random T5 v1.1 (tests/Integration/CPU/encdec.py, t5.py),
Generator(tensor_parallel=2) under `mpirun -np 2 python3` generates the
1-rank Generator's tokens on both ranks, greedy (each decision of the
1-rank whole model clear of a near-tie) and beam search, the builds kept
in one cache_dir. Under mpi4py, imported before tfc, with mpirun's
OMPI_COMM_WORLD_* variables removed from the ranks' environment (as a
launcher other than mpirun, srun's PMIx, leaves them): the split model
takes its rank and the job's size from MPI_COMM_WORLD, T5's greedy tokens
again, and a build for 4 ranks is refused naming the 2 ranks of the job;
one process with mpi4py (MPI initialised as a singleton) is refused as a
single process, and under mpirun a split model loaded after mpi4py's
MPI_Finalize is refused too. Errors are one line each.

usage: tensor-parallel-encdec.py BINDIR WORKDIR [SEED]
       tensor-parallel-encdec.py --rank WORKDIR [--mpi4py]  (each MPI rank)
       tensor-parallel-encdec.py --single WORKDIR  (one process, mpi4py)
       tensor-parallel-encdec.py --finalized WORKDIR  (each MPI rank)
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
sys.path.insert(0, INTEGRATION)
MPI = None
if sys.argv[1] in ("--single", "--finalized") or "--mpi4py" in sys.argv:
    from mpi4py import MPI  # noqa: E402  (before tfc: it initialises MPI)
if "--mpi4py" in sys.argv:
    # mpirun's variables gone: the ranks come from MPI_COMM_WORLD alone.
    for name in ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"):
        os.environ.pop(name, None)
_spec = importlib.util.spec_from_file_location(
    "tp_python", os.path.join(HERE, "tensor-parallel.py"))
tpp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tpp)  # tfc on the path, mpirun's helpers
import encdec  # noqa: E402
import t5  # noqa: E402
import tfc  # noqa: E402

BATCH, SEQ, NEW = 2, 9, 8
MAX_LENGTH = 1 + NEW  # the decoder start token and the new tokens
# Every head and feed-forward width divisible by 2 and 4 (Marian's by 4
# for the refused 4-rank build).
MODELS = {
    "marian": dict(encdec.CASES["marian"], decoder_attention_heads=4),
    "t5v11": dict(t5.CASES["t5v11"], d_ff=54),
}


def generator(work, name):
    """The 2-rank Generator; the ranks share its cache_dir (each compiles
    what it finds missing, and loads each build once)."""
    return tfc.Generator(os.path.join(work, name), MAX_LENGTH, batch=BATCH,
                         tensor_parallel=2,
                         cache_dir=os.path.join(work, "cache"))


def refusal(lib):
    try:
        tfc.Model(lib)
        return "no error"
    except tfc.Error as e:
        return e.message


def rank_main(work, mpi4py):
    """One rank's generations; its results go to rank<r>[_mpi4py].npz and
    .json for the driver to check."""
    inp = np.load(os.path.join(work, "inputs.npz"))
    rank = MPI.COMM_WORLD.Get_rank() if mpi4py else \
        int(os.environ["OMPI_COMM_WORLD_RANK"])
    res, info = {}, {"launched": os.environ.get("OMPI_COMM_WORLD_SIZE")}
    for name in ("t5v11",) if mpi4py else MODELS:
        with generator(work, name) as g:
            res[name + "_greedy"] = g.generate(inp["ids"], inp["mask"],
                                               max_new_tokens=NEW)
            info[name + "_rank"] = g.rank
            if not mpi4py:
                res[name + "_beam"] = g.generate(
                    inp["ids"], inp["mask"], max_new_tokens=NEW, num_beams=3)
    if mpi4py:
        info["mpi"] = [MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()]
        info["tp4"] = refusal(os.path.join(work, "marian_tp4.so"))
    stem = os.path.join(work, "rank%d%s" % (rank, "_mpi4py" if mpi4py
                                             else ""))
    np.savez(stem + ".npz", **res)
    with open(stem + ".json", "w") as f:
        json.dump(info, f)


def launch(h, label, python, args):
    """`python this-file ARGS` (under mpirun when args start so); True when
    it exits 0 with nothing on stderr."""
    done = subprocess.run(python + [__file__] + args, capture_output=True,
                          text=True, timeout=120)
    err = done.stderr.strip().splitlines()
    ok = done.returncode == 0 and not err
    h.expect("%s: exit 0, stderr empty (%s)" % (label, err[-1] if err
                                                 else ""), ok)
    return ok


def greedy_margin(h, name, cfg, ids, mask, seqs):
    """The smallest gap between the best two logits at the greedy
    decisions that made `seqs` (the 1-rank whole model on them), those
    of rows not finished yet and not forced (forced_eos_token_id)."""
    lib = h.path(name + "_whole.so")
    made = seqs.shape[1] - 1  # the tokens made (all rows may stop early)
    subprocess.run([h.compile, "--hf", h.path(name), "--batch", str(BATCH),
                    "--seq-len", str(SEQ), "--decoder-seq-len", str(made),
                    "--output=logits", "-o", lib], check=True,
                   capture_output=True)
    with tfc.Model(lib, weights=h.path(name + "/model.safetensors")) as m:
        logits, = m.run(ids, mask, seqs[:, :-1])
    top = np.sort(logits, -1)
    gap = top[..., -1] - top[..., -2]
    eos = cfg["eos_token_id"]
    # Decision j makes token j + 1: taken while no EOS is among tokens
    # 1..j, forced at the last when the config forces an EOS there.
    live = np.cumsum(seqs[:, 1:] == eos, 1) - (seqs[:, 1:] == eos) == 0
    if cfg.get("forced_eos_token_id") is not None and made == NEW:
        live[:, -1] = False
    return float(gap[live].min())


def check_generation(h, name, cfg, ids, mask, runs):
    """The 2-rank Generators' tokens (runs: each rank's) against the
    1-rank Generator's."""
    with tfc.Generator(h.path(name), MAX_LENGTH, batch=BATCH) as g:
        want = {"greedy": g.generate(ids, mask, max_new_tokens=NEW),
                "beam": g.generate(ids, mask, max_new_tokens=NEW,
                                   num_beams=3)}
    gap = greedy_margin(h, name, cfg, ids, mask, want["greedy"])
    h.expect("%s: the 1-rank greedy decisions' smallest margin %.2g > %g" % (
        name, gap, tpp.MARGIN), gap > tpp.MARGIN)
    for r, (got, info) in enumerate(runs):
        h.expect("%s rank %d: the Generator's rank %s" % (
            name, r, info[name + "_rank"]), info[name + "_rank"] == r)
        for search in ("greedy", "beam"):
            key = "%s_%s" % (name, search)
            h.expect("%s rank %d, %s: Generator(tensor_parallel=2) %s as the "
                     "1-rank Generator's %s" % (
                         name, r, search, got[key].tolist(),
                         want[search].tolist()),
                     np.array_equal(got[key], want[search]))
    return want["greedy"]


def main():
    if sys.argv[1] == "--rank":
        return rank_main(sys.argv[2], "--mpi4py" in sys.argv)
    if sys.argv[1] == "--single":
        message = refusal(os.path.join(sys.argv[2], "marian_tp2.so"))
        print(json.dumps([MPI.COMM_WORLD.Get_size(), message]))
        return
    if sys.argv[1] == "--finalized":
        MPI.Finalize()
        print(refusal(os.path.join(sys.argv[2], "marian_tp2.so")))
        return
    from tfc_testing.arrays import random_tokens
    tp = tpp.integration()
    # A fixed seed by default, whose greedy decisions are clear of a tie
    # and whose tokens vary (a random model's often repeat one).
    h, rng = tpp.start(10)
    encdec.write_model(h.path("marian"), rng, MODELS["marian"])
    t5.write_model(h.path("t5v11"), rng, MODELS["t5v11"])
    ids, mask = random_tokens(rng, MODELS["t5v11"]["vocab_size"], BATCH,
                              SEQ, padding=3)
    np.savez(h.path("inputs.npz"), ids=ids, mask=mask)
    for ranks in (2, 4):
        tp.build(h, h.path("marian"), "marian", ranks,
                 ["--seq-len", str(SEQ), "--part=encoder", "--cross-kv"])
    mpirun = tp.MPIRUN + ["-np", "2"]
    want = {}
    if launch(h, "mpirun -np 2 python3", mpirun + [sys.executable],
              ["--rank", h.workdir]):
        runs = [tpp.load_rank(h, r) for r in range(2)]
        for name, cfg in MODELS.items():
            want[name] = check_generation(h, name, cfg, ids, mask, runs)
    python = tpp.python_with_mpi4py()
    h.expect("a python3 with mpi4py (pip install mpi4py: "
             "scripts/setup.sh)", python is not None)
    if python and want and launch(
            h, "mpirun -np 2 python3, mpi4py first, no OMPI_COMM_WORLD_*",
            mpirun + [python], ["--rank", h.workdir, "--mpi4py"]):
        check_mpi4py(h, want["t5v11"])
    if python:
        check_single(h, python)
        check_finalized(h, mpirun + [python])
    h.finish()


def check_mpi4py(h, want):
    tp4 = h.path("marian_tp4.so")
    for r in range(2):
        got, info = tpp.load_rank(h, r, "_mpi4py")
        h.expect("mpi4py rank %d: no OMPI_COMM_WORLD_SIZE (%s), the rank and "
                 "size of MPI_COMM_WORLD %s, the split model's rank %s" % (
                     r, info["launched"], info["mpi"], info["t5v11_rank"]),
                 info["launched"] is None and info["mpi"] == [r, 2] and
                 info["t5v11_rank"] == r)
        h.expect("mpi4py rank %d: T5 greedy %s as the 1-rank Generator's" % (
            r, got["t5v11_greedy"].tolist()),
            np.array_equal(got["t5v11_greedy"], want))
        h.expect("mpi4py rank %d: the 4-rank build refused, one line: %s" % (
            r, info["tp4"]), info["tp4"] == (
                "model %s: built for 4 ranks (tfc-compile --tensor-parallel="
                "4) and run as one of 2 ranks: run it as mpirun -np 4 "
                "python3 ..." % tp4))


def check_single(h, python):
    lib = h.path("marian_tp2.so")
    done = subprocess.run([python, __file__, "--single", h.workdir],
                          capture_output=True, text=True, timeout=60)
    try:
        size, message = json.loads(done.stdout)
    except ValueError:
        size, message = None, done.stdout + done.stderr
    h.expect("one process, mpi4py's singleton MPI of %s rank: the 2-rank "
             "build refused, one line: %s" % (size, message),
             size == 1 and message == "model %s: built for 2 ranks "
             "(tfc-compile --tensor-parallel=2) and run as a single process: "
             "run it as mpirun -np 2 python3 ..." % lib)


def check_finalized(h, mpirun):
    done = subprocess.run(mpirun + [__file__, "--finalized", h.workdir],
                          capture_output=True, text=True, timeout=60)
    lines = done.stdout.splitlines()
    h.expect("mpirun -np 2, mpi4py's MPI_Finalize, then a split model: both "
             "ranks refuse it, one line: %s" % lines, done.returncode == 0 and
             lines == ["model %s: MPI is finalised already: MPI_Finalize ran "
                       "before the split model loaded (libmpi.so.40)" %
                       h.path("marian_tp2.so")] * 2)


if __name__ == "__main__":
    main()
