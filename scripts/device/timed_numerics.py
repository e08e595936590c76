"""Numerics at the timed shapes, on adversarial inputs (accuracy.py: scores
rising along the keys, single spikes, |x| ~ 30): the default build of every
attention, decode and GEMM timing model runs once on each case, checked
against float64 on a subsample of rows (norm-wise, worst row, largest
absolute error). The timing phases check the N(0, 1) inputs they time; for
attention, the first peer that runs gets the same inputs and its errors
are printed beside ours (information)."""

import os

import torch

import accuracy
from attention_timing import (DTYPES, _Info, check_rows, timing_order)
from common import load_output, save_tensor
from gemm_timing import check_rows64, gemm_inputs

GROUPS = ("timing", "decode_timing", "gemm_timing")


def attention_inputs(m, case, gen, device):
    shapes = [(m["B"], m["H"], m["Sq"], m["D"])] + \
        [(m["B"], m["Hkv"], m["Skv"], m["D"])] * 2
    return [accuracy.draw(case, role, shape, gen, device).to(
        DTYPES[m["dtype"]]) for role, shape in zip("qkv", shapes)]


def run_timed_numerics(manifest, base, run, device, seed, work, checks,
                       clock, peers=()):
    gen = torch.Generator(device=device)
    gen.manual_seed(seed + 5)
    cpu_gen = torch.Generator()
    cpu_gen.manual_seed(seed + 5)
    models = [m for m in manifest["models"] if m["group"] in GROUPS]
    attention = timing_order([m for m in models if m["group"] == "timing"])
    others = [m for m in models if m["group"] != "timing"]
    for m in others + attention:
        gemm = m["group"] == "gemm_timing"
        cases = accuracy.GEMM_CASES if gemm else accuracy.ATTENTION_CASES
        for case in cases[1:]:  # N(0, 1): checked where it is timed
            label = "%s fused, %s inputs, vs float64" % (m["name"], case)
            if m.get("errors", {}).get("fused"):
                checks.add(False, label, "not built: " + m["errors"]["fused"])
                continue
            if clock.left() < 30:
                checks.add(False, label, "not run: time budget spent")
                continue
            try:
                one_case(m, case, gemm, base, run, device, gen, cpu_gen,
                         work, checks, clock, label, peers)
            except Exception as e:  # a bug here must not end the whole check
                checks.add(False, label, "check.py error: %s: %s" %
                           (type(e).__name__, e))


def one_case(m, case, gemm, base, run, device, gen, cpu_gen, work, checks,
             clock, label, peers):
    if gemm:
        a, b_in, b = gemm_inputs(m, device, gen, case)
        inputs = (a, b_in)
    else:
        inputs = attention_inputs(m, case, gen, device)
    paths = []
    for i, t in enumerate(inputs):
        paths.append(os.path.join(work, "a%d.npy" % i))
        save_tensor(t, paths[-1])
    out_path = os.path.join(work, "a_out.npy")
    if os.path.exists(out_path):
        os.remove(out_path)
    _, err = run(os.path.join(base, m["paths"]["fused"]), paths, out_path,
                 timeout=min(120, clock.left() - 10), build="fused")
    if err:
        checks.add(False, label, err)
        return
    if gemm:
        got = load_output(out_path, "f32", device)
        check_rows64(m, got, a, b, label, checks, cpu_gen)
        return
    got = load_output(out_path, m["dtype"], device)
    rows = accuracy.sample_rows(m["Sq"], cpu_gen)
    ref = accuracy.attention64(*inputs, m["causal"], rows)
    check_rows(m, got, rows, ref, label, checks)
    # The first peer that runs, on the same inputs (prefill shapes).
    for peer in peers:
        if peer.error or peer.late or m["group"] != "timing":
            continue
        try:
            with peer.context():
                theirs = peer(*inputs, m["causal"])
        except RuntimeError:
            continue
        check_rows(m, theirs, rows, ref, "%s %s, %s inputs, vs float64 "
                   "(info)" % (m["name"], peer.name, case), _Info())
        break
