"""The numerics part of the device check: every numerics model of specs.py
on fresh random inputs, each build against a float64 numpy reference
(tests/pylib/tfc_testing/reference.py) and fused against unfused; and the
same under compute-sanitizer."""

import os
import shutil

import numpy as np

import accuracy
import specs
from common import TfcRun
from tfc_testing import reference
from tfc_testing.arrays import bf16_to_f32, f32_to_bf16

NP_FILE_DTYPE = {"f32": np.float32, "f16": np.float16}


def encode(x, dtype):
    """float32/float64 values -> the array tfc-run reads (bf16: '<u2' bits,
    rounded to nearest even)."""
    if dtype == "bf16":
        return f32_to_bf16(x)
    return np.ascontiguousarray(x, dtype=NP_FILE_DTYPE[dtype])


def decode(a, dtype):
    """The array tfc-run wrote (or read) -> float64 values."""
    return (bf16_to_f32(a) if dtype == "bf16" else a).astype(np.float64)


def draw(rng, spec):
    shape, gen = tuple(spec["shape"]), spec["gen"]
    if gen["kind"] == "normal":
        return gen["shift"] + gen["scale"] * rng.standard_normal(shape)
    if gen["kind"] == "padding_mask":  # [B,1,1,Skv]: batch b hides 3b+1 keys
        m = np.zeros(shape)
        for b in range(shape[0]):
            m[b, ..., shape[-1] - 1 - 3 * b:] = -np.inf
        return m
    if gen["kind"] == "adversarial":  # accuracy.draw's cases, seeded here
        import torch
        g = torch.Generator()
        g.manual_seed(int(rng.integers(2**63)))
        return accuracy.draw(gen["case"], gen["role"], shape,
                             g).double().numpy()
    if gen["kind"] == "keep_mask":  # [B,S] of 0/1: batch b pads 3b+2
        m = np.ones(shape)
        for b in range(shape[0]):
            m[b, shape[-1] - 2 - 3 * b:] = 0
        return m
    raise ValueError("unknown generator %r" % gen)


def matmul(p, x):
    """A @ B; B given as [batch, n, k] where p["weight"]."""
    b = x["b"]
    return x["a"] @ (b.transpose(0, 2, 1) if p.get("weight") else b)


# spec["ref"]["op"] -> the float64 output from spec["ref"] and the inputs
# by name (float64 arrays of the rounded values the build was given).
REFERENCES = {
    "attention": lambda p, x: reference.attention(
        x["q"], x["k"], x["v"], x.get("mask"), p["scale"], p["causal"]),
    "softmax": lambda p, x: reference.softmax(x["x"], p["dim"]),
    "layer_norm": lambda p, x: reference.layer_norm(
        x["x"], x["gamma"], x["beta"], reference.f32(p["eps"])),
    "rms_norm": lambda p, x: reference.rms_norm(x["x"], x["gamma"],
                                                reference.f32(p["eps"])),
    "matmul": matmul,
    "bert_layer": lambda p, x: reference.bert_layer(x),
    "gpt_layer": lambda p, x: reference.gpt_layer(x),
}


# Run under compute-sanitizer after the numerics (memcheck: out-of-bounds
# and misaligned accesses; racecheck: shared-memory races): one model per
# kind of hand-built kernel, at odd sizes.
SANITIZE = {"memcheck": ["attn_causal_f16", "attn_odd_77x200_d80_f16",
                         "attn_padmask_f16", "attn_decode_gqa16x2_f16",
                         "matmul_f16_3x65x48x42",
                         "matmul_bf16_2x130x200x64",
                         "matmul_bf16_gemv_2x3x1000x72_weight",
                         "matmul_f16_gemv_1x8x520x200",
                         "softmax_64x4096_f16", "layer_norm_256x1024_f16",
                         "rms_norm_128x4096_f16"],
            "racecheck": ["attn_causal_f16", "attn_decode_gqa16x2_f16",
                          "matmul_f16_3x65x48x42",
                          "matmul_bf16_gemv_2x3x1000x72_weight"]}


def run_sanitizer(manifest, base, tfc_run, seed, work, checks, clock):
    """The SANITIZE models under compute-sanitizer, numerics checked too;
    any report fails the check (--error-exitcode)."""
    tool = shutil.which("compute-sanitizer")
    if not tool:
        print("info compute-sanitizer not found: skipped", flush=True)
        return
    rng = np.random.default_rng(seed + 1)
    specs = {m["name"]: m for m in manifest["models"]}
    for kind, names in SANITIZE.items():
        for name in names:
            if name not in specs or clock.left() < 60:
                continue
            run = TfcRun(tool, [])
            run.prefix = ["--tool", kind, "--error-exitcode", "99",
                          "--print-limit", "5", tfc_run]
            # The default kernel (sm_90a: wgmma on TMA tiles), and where the
            # model has them the mma.sync ones (registers; cp.async with 32
            # rows per warp) and the other wgmma ones (their copies and
            # stages, under racecheck; the bf16 matmul's GEMMs under
            # memcheck).
            builds = ["fused"] + [b for b in ("mma", "async32", "wgmma",
                                              "wgmma2", "tma", "tma2p",
                                              "dmma")
                                  if b in specs[name]["builds"]]
            spec = dict(specs[name], name="%s [%s]" % (name, kind),
                        builds=builds)
            check_model(spec, base, run, rng, work, checks, clock)


def run_numerics(manifest, base, run, seed, work, checks, clock):
    rng = np.random.default_rng(seed)
    for spec in [m for m in manifest["models"] if m["group"] == "numerics"]:
        try:
            check_model(spec, base, run, rng, work, checks, clock)
        except Exception as e:  # a bug here must not end the whole check
            checks.add(False, spec["name"], "check.py error: %s: %s" %
                       (type(e).__name__, e))


def check_model(spec, base, run, rng, work, checks, clock):
    name, dtype = spec["name"], spec["dtype"]
    # Inputs: drawn here, rounded to their dtype, written for tfc-run;
    # the reference reads the same rounded values in float64.
    paths, values = [], {}
    for i, inp in enumerate(spec["inputs"]):
        a = encode(draw(rng, inp), inp["dtype"])
        paths.append(os.path.join(work, "in%d.npy" % i))
        np.save(paths[-1], a)
        values[inp["name"]] = decode(a, inp["dtype"])
    ref = REFERENCES[spec["ref"]["op"]](spec["ref"], values)
    floors = accuracy.rounding_floor(
        ref, lambda r: decode(encode(r, dtype), dtype))
    floor = floors[0]
    outs = {}
    for build in spec["builds"]:
        label = "%s %s" % (name, build)
        rel = spec["paths"].get(build)
        if spec.get("errors", {}).get(build) or not rel:
            checks.add(False, label, "not built: " +
                       spec.get("errors", {}).get(build, "?"))
            continue
        if clock.left() < 10:
            checks.add(False, label, "not run: time budget spent")
            continue
        out_path = os.path.join(work, "out.npy")
        if os.path.exists(out_path):
            os.remove(out_path)
        # A run of these small models takes about a second, CUDA
        # start-up included.
        stdout, err = run(os.path.join(base, rel), paths, out_path,
                          timeout=min(10 if run.timeouts else 30,
                                      clock.left() - 5), build=build)
        if err:
            checks.add(False, label, err)
            continue
        got = decode(np.load(out_path), dtype)
        if list(got.shape) != spec["output"]["shape"]:
            checks.add(False, label, "output shape %s, expected %s" %
                       (list(got.shape), spec["output"]["shape"]))
            continue
        outs[build] = got
        ok, line = accuracy.verdict(
            accuracy.stats(got, ref), specs.bounds(spec["tol"][build], dtype,
                                                   floors))
        checks.add(ok, label, "%s; %s rounding floor %.1e" % (line, dtype,
                                                              floor))
    if "fused" in outs and "unfused" in outs:
        tol = specs.bound(spec["tol"]["unfused"], dtype, floor)
        d = float(np.linalg.norm(outs["fused"] - outs["unfused"]) /
                  max(np.linalg.norm(ref), 1e-300))
        checks.add(d <= tol, "%s fused vs unfused" % name,
                   "rel.diff %.2e (tol %.1e)" % (d, tol))
