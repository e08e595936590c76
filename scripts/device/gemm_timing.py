"""The GEMM timing of the device check: each GEMM timing model's tfc
builds (tfc-run) against torch.matmul on the same f16 inputs, their results
checked against the f32 product; and its table."""

import os

import numpy as np
import torch

import specs
from common import HBM_PEAK_GBPS, fmt, median_ms, once_ms


def run_gemm_timing(manifest, base, run, device, seed, work, checks, clock,
                    rows):
    """Times each GEMM timing model's builds (the default, "fused"; "mma",
    "wgmma")
    with tfc-run and torch.matmul on the same f16 inputs (its result in
    f16, ours in f32), and checks our results against the f32 product of
    the inputs. One row per model."""
    gpu = device.type == "cuda"
    gen = torch.Generator(device=device)
    gen.manual_seed(seed + 2)
    target_s = 0.3 if gpu else 0.1
    for m in [m for m in manifest["models"] if m["group"] == "gemm_timing"]:
        row = {"name": m["name"], "M": m["M"], "K": m["K"], "N": m["N"],
               "batch": m["batch"], "weight": m.get("weight", False),
               "notes": [],
               "flop": 2.0 * m["batch"] * m["M"] * m["K"] * m["N"]}
        rows.append(row)
        if clock.left() < 40:
            row["notes"].append("%s skipped: time budget spent" % m["name"])
            continue
        try:
            time_gemm(m, base, run, device, gen, work, checks, clock, row,
                      target_s)
        except Exception as e:  # a bug here must not end the whole check
            checks.add(False, m["name"], "check.py error: %s: %s" %
                       (type(e).__name__, e))


def time_gemm(m, base, run, device, gen, work, checks, clock, row, target_s):
    gpu = device.type == "cuda"
    a = torch.randn((m["batch"], m["M"], m["K"]), generator=gen,
                    device=device).to(torch.float16)
    # A weight as stored, [N, K], is multiplied as torch.nn.functional.linear
    # does: by its transposed view, which cuBLAS reads in place.
    weight = m.get("weight", False)
    shape = (m["N"], m["K"]) if weight else (m["K"], m["N"])
    b_in = torch.randn((m["batch"],) + shape, generator=gen,
                       device=device).to(torch.float16)
    b = b_in.transpose(-1, -2) if weight else b_in
    paths = []
    for i, t in enumerate((a, b_in)):
        paths.append(os.path.join(work, "g%d.npy" % i))
        np.save(paths[-1], t.cpu().numpy())

    def torch_ms():  # (the CPU has no f16 GEMM)
        return once_ms(lambda: torch.matmul(a, b) if gpu else
                       torch.matmul(a.float(), b.float()), gpu)
    for _ in range(3):
        torch_ms()
    n = int(min(200, max(5, target_s * 1e3 / max(torch_ms(), 1e-3))))
    times = sorted(torch_ms() for _ in range(n))
    row["torch_ms"] = times[len(times) // 2]
    expect = torch.matmul(a.float(), b.float())
    for build in m["builds"]:
        label = "%s %s" % (m["name"], build)
        error = m.get("errors", {}).get(build)
        if error:
            checks.add(False, label, "not built: " + error)
            continue
        out_path = os.path.join(work, "g_out.npy")
        if os.path.exists(out_path):
            os.remove(out_path)
        repeat = int(min(50, max(3, target_s * 1e3 / max(row["torch_ms"],
                                                          1e-3))))
        stdout, err = run(os.path.join(base, m["paths"][build]), paths,
                          out_path, timeout=min(120, clock.left() - 20),
                          repeat=repeat, warmup=2, build=build)
        ms = median_ms(stdout)
        if err or ms is None:
            checks.add(False, label, err or "tfc-run printed no time")
            continue
        row[build + "_ms"] = ms
        got = torch.from_numpy(np.load(out_path)).to(device).float()
        e = float(torch.linalg.norm(got - expect) / torch.linalg.norm(expect))
        finite = bool(torch.isfinite(got).all())
        tol = m["tol"][build]
        checks.add(finite and e <= tol, label + " vs f32 product",
                   "rel.err %.2e (tol %.0e)%s" % (
                       e, tol, "" if finite else ", NON-FINITE values"))
    # Few rows of A (the GEMV kernels), reading B is the work: its bytes
    # per second against the HBM's.
    if m["M"] <= 32:
        nbytes = 2.0 * m["batch"] * m["K"] * m["N"]
        row["notes"].append("%s reads B (%.1f MB) at %s GB/s (of about %d)" % (
            m["name"], nbytes / 1e6, ", ".join(
                "%s %.0f" % ("torch" if k == "torch_ms" else
                             "tfc " + k[:-3], nbytes / row[k] / 1e6)
                for k in row if k.endswith("_ms") and row[k]),
            HBM_PEAK_GBPS))
    print("time %-30s %s" % (m["name"], ", ".join(
        "%s %.3f ms" % (k[:-3], row[k]) for k in row if k.endswith("_ms"))),
        flush=True)


def gemm_table(rows):
    """One row per GEMM shape: torch.matmul, then each tfc build (ms,
    TFLOP/s, torch ms / ours)."""
    builds = [b for b in ("fused",) + tuple(specs.GPU_VARIANTS)
              if any(r.get(b + "_ms") for r in rows)]
    head = ["batch x M x K x N", "torch.matmul ms", "TFLOP/s"]
    for b in builds:
        name = "default" if b == "fused" else b
        head += ["tfc %s ms" % name, "TFLOP/s", "vs torch"]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---:" for _ in head) + "|"]
    for r in rows:
        def rate(key):
            return fmt(r["flop"] / r[key] / 1e9 if r.get(key) else None,
                       "%.3g")
        cells = ["%dx%dx%dx%d%s" % (r["batch"], r["M"], r["K"], r["N"],
                                   ", B as [N, K]" if r["weight"] else ""),
                 fmt(r.get("torch_ms")), rate("torch_ms")]
        for b in builds:
            ours = r.get(b + "_ms")
            cells += [fmt(ours), rate(b + "_ms"),
                      "%.2fx" % (r["torch_ms"] / ours)
                      if ours and r.get("torch_ms") else "—"]
        lines.append("| " + " | ".join(cells) + " |")
        lines += ["- " + n for n in r["notes"]]
    return lines
