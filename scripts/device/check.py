"""Run the models prepare.py compiled: numerics against float64 references,
then attention timings against PyTorch's SDPA (cuDNN and flash backends)
and FlashAttention-3, GEMM timings against torch.matmul, decode attention
timings against PyTorch's SDPA, numerics at the timed shapes on adversarial
inputs, whole models against PyTorch eager and torch.compile, 128-token
generation against transformers' compiled generate(), and last the late
peers (FA3 through PyTorch, Triton) on the attention timing's
shapes. Markdown tables at the end (stdout and OUT/device-check.md).

usage: check.py --manifest .device/manifest.json --tfc-run PATH --out DIR
                [--budget SECONDS] [--seed N]

On the device machine it uses the GPU (SDPA with a backend forced, CUDA
events; the float64 references: numpy's on the host for the numerics
models, PyTorch's on the GPU for the timed shapes). Without a GPU (the dry
run, the CPU PyTorch of bench/.venv) the same code runs on the CPU, and
the peer is a float32 math attention timed with a wall clock: a smoke test
only.

The parts, in the order they run: numerics.py (and compute-sanitizer, last),
minilm.py and decoders.py (whole models), attention_timing.py (with the
late peers), gemm_timing.py, decode_timing.py, timed_numerics.py, e2e.py,
generate_timing.py; report.py writes the tables, common.py and accuracy.py
hold what they share.

Exit status: 0 when every numerics check passed, 1 otherwise (a model that
did not build or load, a non-finite output, an error over its tolerance, a
check skipped for lack of time). Timings never fail the run, except that the
timed tfc builds' outputs must agree with PyTorch's on the timing inputs
too (and a timed build that fails to run is a failed check).
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "pylib"))
import decoders  # noqa: E402
import e2e  # noqa: E402
import generate_timing  # noqa: E402
import minilm  # noqa: E402
from attention_timing import (Timing, TritonPeer,  # noqa: E402
                              make_peers, run_late_timing, run_timing)
from common import Checks, Clock, TfcRun  # noqa: E402
from decode_timing import DecodeTiming, run_decode_timing  # noqa: E402
from gemm_timing import run_gemm_timing  # noqa: E402
from numerics import run_numerics, run_sanitizer  # noqa: E402
from report import card_header, report  # noqa: E402
from timed_numerics import run_timed_numerics  # noqa: E402

# The parts of the check, in the order they run.
PHASES = ("numerics", "models", "timing", "gemm", "decode", "accuracy",
          "e2e", "generate", "triton", "sanitizer")
TIMING_PHASES = {"timing", "gemm", "decode", "accuracy", "e2e", "triton"}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--manifest", required=True)
    p.add_argument("--tfc-run", required=True)
    p.add_argument("--out", default="")
    p.add_argument("--budget", type=float, default=300,
                   help="seconds for the whole check; timing stops early "
                   "so that the table is written within it")
    p.add_argument("--seed", type=int)
    p.add_argument("--skip-timing", action="store_true")
    p.add_argument("--phases", default=",".join(PHASES),
                   help="comma-separated, in the check's order: %s "
                   "(default: all; a rerun names the ones the first run "
                   "left)" % ", ".join(PHASES))
    p.add_argument("--emulated", action="store_true",
                   help="the models run on the PTX interpreter of the fake "
                   "CUDA driver: numerics only, each model run once, with "
                   "timeouts 30 times longer")
    a = p.parse_args()
    a.skip_timing = a.skip_timing or a.emulated
    phases = set(x.strip() for x in a.phases.split(",") if x.strip())
    if not phases or phases - set(PHASES):
        p.error("--phases: %r; the phases are %s" %
                (a.phases, ", ".join(PHASES)))
    if a.skip_timing:
        phases -= TIMING_PHASES

    clock = Clock(a.budget)
    with open(a.manifest) as f:
        manifest = json.load(f)
    base = os.path.dirname(os.path.abspath(a.manifest))
    gpu = torch.cuda.is_available()
    if manifest["target"] != "cpu" and not gpu:
        print("check: the models are for %s but PyTorch sees no GPU" %
              manifest["target"])
    device = torch.device("cuda" if gpu else "cpu")
    seed = a.seed if a.seed is not None else time.time_ns() % 2**32
    header = card_header(device, manifest, seed)
    print(header)
    print("seed %d (rerun with --seed %d)" % (seed, seed), flush=True)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
    extra = [] if gpu else ["--threads", "1"]
    run = TfcRun(a.tfc_run, extra)
    if a.emulated:
        run.once, run.timeout_scale = True, 30.0
    work = tempfile.mkdtemp(prefix="tfc-device-check-")
    checks, rows, peers, gemm_rows = Checks(), [], make_peers(device), []
    decode_rows, e2e_rows, gen_rows = [], [], []
    try:
        if "numerics" in phases:
            print("== numerics (%s)" % device, flush=True)
            run_numerics(manifest, base, run, seed, work, checks, clock)
        if "models" in phases and a.emulated:
            # Whole models are too many instructions for the interpreter
            # (hours, before their matmuls had a GEMM kernel in f32).
            # bert_layer and gpt_layer stand in.
            print("== all-MiniLM-L6-v2, decoders: not run by the interpreter",
                  flush=True)
        elif "models" in phases:
            print("== all-MiniLM-L6-v2", flush=True)
            try:
                minilm.check(base, run, device, work, checks, clock)
            except Exception as e:  # a bug here must not end the whole check
                checks.add(False, "minilm", "check.py error: %s: %s" %
                           (type(e).__name__, e))
            print("== decoders (GPT-2, LLaMA)", flush=True)
            try:
                decoders.check(base, run, work, checks, clock)
            except Exception as e:  # a bug here must not end the whole check
                checks.add(False, "decoders", "check.py error: %s: %s" %
                           (type(e).__name__, e))
        report(header, checks, rows, peers, gpu, a.out, clock, False)
        timing = Timing(base, run, device, seed, work, checks, clock,
                        peers, TritonPeer(device))
        if "timing" in phases:
            print("== timing (%.0f s left of %.0f)" % (clock.left(),
                                                      a.budget), flush=True)
            run_timing(manifest, timing, rows)
        if "gemm" in phases:
            print("== GEMM timing (%.0f s left)" % clock.left(), flush=True)
            run_gemm_timing(manifest, base, run, device, seed, work, checks,
                            clock, gemm_rows)
        if "decode" in phases:
            print("== decode timing (%.0f s left)" % clock.left(),
                  flush=True)
            try:
                run_decode_timing(manifest, DecodeTiming(
                    base, run, device, seed, work, checks, clock),
                    decode_rows)
            except Exception as e:  # a bug here must not end the whole check
                checks.add(False, "decode timing", "check.py error: %s: %s" %
                           (type(e).__name__, e))
        if "accuracy" in phases:
            print("== numerics at the timed shapes, adversarial inputs "
                  "(%.0f s left)" % clock.left(), flush=True)
            run_timed_numerics(manifest, base, run, device, seed, work,
                               checks, clock, peers)
        if "e2e" in phases:
            print("== whole models against PyTorch eager and torch.compile "
                  "(%.0f s left)" % clock.left(), flush=True)
            e2e.check(base, run, device, work, checks, clock, e2e_rows, seed)
        if "generate" in phases:
            # Emulated (or --skip-timing): the tokens only.
            print("== generation against transformers' generate() "
                  "(%.0f s left)" % clock.left(), flush=True)
            generate_timing.check(base, manifest, device, work, checks,
                                  clock, gen_rows, seed,
                                  timed=not a.skip_timing)
        if "triton" in phases:
            print("== late attention peers: FA3 through PyTorch, Triton "
                  "(%.0f s left)" % clock.left(), flush=True)
            try:
                run_late_timing(manifest, timing, rows)
            except Exception as e:  # noqa: BLE001 (a peer's, not ours)
                print("Triton timing stopped: %s: %s" % (type(e).__name__, e),
                      flush=True)
        # Last: a debugging aid that the time left may cut short.
        if gpu and "sanitizer" in phases:
            print("== compute-sanitizer (%.0f s left)" % clock.left(),
                  flush=True)
            run_sanitizer(manifest, base, a.tfc_run, seed, work, checks,
                          clock)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        md = report(header, checks, rows, peers, gpu, a.out, clock,
                    True, gemm_rows, decode_rows, e2e_rows, gen_rows)
        print()
        print(md, end="", flush=True)
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
