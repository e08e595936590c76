"""The GEMM timing of the device check: each GEMM timing model's tfc
builds (tfc-run; the GEMVs also by Nsight Compute with the L2 flushed)
against torch.matmul on the same f16 inputs (kernel only: queued behind a
sleeping kernel, the L2 flushed before each call), their results checked
against the f32 product and against float64 on sampled rows; and its
table."""

import os
import shutil

import torch

import accuracy
import ncu_profile
import specs
from common import (L2Flush, fmt, hbm_peak_gbps, load_output, median_ms,
                    queued_times, save_tensor)


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
    props = torch.cuda.get_device_properties(device) if gpu else None
    flush = L2Flush(device, getattr(props, "L2_cache_size", 0)
                    if props else 0)
    ncu = shutil.which("ncu") if gpu else None
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
                      target_s, flush, ncu)
        except Exception as e:  # a bug here must not end the whole check
            checks.add(False, m["name"], "check.py error: %s: %s" %
                       (type(e).__name__, e))


def gemm_inputs(m, device, gen, case="normal"):
    """(A, B as stored, B as multiplied) in f16 for model `m`, drawn as
    accuracy.draw's `case`. A weight as stored, [N, K], is multiplied as
    torch.nn.functional.linear does: by its transposed view, which cuBLAS
    reads in place."""
    weight = m.get("weight", False)
    shape = (m["N"], m["K"]) if weight else (m["K"], m["N"])
    a = accuracy.draw(case, "a", (m["batch"], m["M"], m["K"]), gen,
                      device).to(torch.float16)
    b_in = accuracy.draw(case, "b", (m["batch"],) + shape, gen,
                         device).to(torch.float16)
    return a, b_in, b_in.transpose(-1, -2) if weight else b_in


def check_rows64(m, got, a, b, label, checks, gen, row=None):
    """`got` [batch, M, N] at a subsample of rows against their float64
    product, within the model's bound (norm-wise, worst row, largest
    absolute error); returns the stats."""
    rows = accuracy.sample_rows(m["M"], gen)
    ref = accuracy.matmul64(a, b, rows).cpu().numpy()
    st = accuracy.stats(got[:, rows.to(got.device)].double().cpu().numpy(),
                        ref)
    tol = m["tol"]["fused"]
    ok, line = accuracy.verdict(st, (tol, tol, tol))
    checks.add(ok, label, "%s; %d rows against float64" % (line, len(rows)))
    if row is not None:
        row["f64"] = st
    return st


def time_gemm(m, base, run, device, gen, work, checks, clock, row, target_s,
              flush, ncu):
    gpu = device.type == "cuda"
    a, b_in, b = gemm_inputs(m, device, gen)
    paths = []
    for i, t in enumerate((a, b_in)):
        paths.append(os.path.join(work, "g%d.npy" % i))
        save_tensor(t, paths[-1])

    def call():  # (the CPU has no f16 GEMM)
        return torch.matmul(a, b) if gpu else torch.matmul(a.float(),
                                                           b.float())
    for _ in range(3):
        call()
    t0 = sorted(queued_times(call, 5, gpu, flush))[2]
    n = int(min(200, max(5, target_s * 1e3 / max(t0, 1e-3))))
    times = sorted(queued_times(call, n, gpu, flush))
    row["torch_ms"] = times[len(times) // 2]
    expect = torch.matmul(a.float(), b.float())
    cpu_gen = torch.Generator()
    cpu_gen.manual_seed(m["M"] * 7919 + m["N"])
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
        lib = os.path.join(base, m["paths"][build])
        stdout, err = run(lib, paths, out_path,
                          timeout=min(120, clock.left() - 20),
                          repeat=repeat, warmup=2, build=build)
        ms = median_ms(stdout)
        if err or ms is None:
            checks.add(False, label, err or "tfc-run printed no time")
            continue
        row[build + "_ms"] = ms
        got = load_output(out_path, "f32", device)
        e = float(torch.linalg.norm(got - expect) / torch.linalg.norm(expect))
        finite = bool(torch.isfinite(got).all())
        tol = m["tol"][build]
        checks.add(finite and e <= tol, label + " vs f32 product",
                   "rel.err %.2e (tol %.0e)%s" % (
                       e, tol, "" if finite else ", NON-FINITE values"))
        check_rows64(m, got, a, b, label + " vs float64", checks, cpu_gen,
                     row if build == "fused" else None)
        # Few rows of A (the GEMV kernels): the default build's kernels
        # again by the profiler, L2 flushed before each.
        if m["M"] <= 32 and build == "fused" and clock.left() > 60:
            if not ncu:
                row["notes"].append("%s: no ncu here: tfc's time with the "
                                    "L2 flushed not measured" % m["name"])
                continue
            row["fused_ncu_ms"], why = ncu_profile.kernel_ms(
                ncu, run.path, lib, paths, out_path)
            if why:
                row["notes"].append("%s: ncu: %s" % (m["name"], why))
    # Few rows of A (the GEMV kernels), reading B is the work: its bytes
    # per second, against the HBM's peak only where the L2 was flushed.
    if m["M"] <= 32:
        nbytes = 2.0 * m["batch"] * m["K"] * m["N"]
        peak, card = hbm_peak_gbps(device)
        flushed = [("torch (L2 flushed)", "torch_ms")]
        if row.get("fused_ncu_ms"):
            flushed.append(("tfc default (ncu, L2 flushed)", "fused_ncu_ms"))
        warm = [("tfc " + k[:-3], k) for k in sorted(row)
                if k.endswith("_ms") and k not in ("torch_ms", "fused_ncu_ms")
                and row[k]]
        row["notes"].append(
            "%s reads B (%.1f MB): %s GB/s%s; L2 warm (tfc-run reuses its "
            "inputs): %s GB/s" % (
                m["name"], nbytes / 1e6, ", ".join(
                    "%s %.0f" % (n, nbytes / row[k] / 1e6) for n, k in
                    flushed if row.get(k)),
                " (HBM peak of the %s: about %d)" % (card, peak) if peak
                else " (%s: HBM peak unknown)" % card,
                ", ".join("%s %.0f" % (n, nbytes / row[k] / 1e6)
                          for n, k in warm) or "—"))
    print("time %-30s %s" % (m["name"], ", ".join(
        "%s %.4f ms" % (k[:-3], row[k]) for k in sorted(row)
        if k.endswith("_ms") and row[k])), flush=True)


def gemm_table(rows):
    """One row per GEMM shape: torch.matmul (kernel only, L2 flushed), then
    each tfc build (ms, TFLOP/s, torch ms / ours), the default build's
    kernels by the profiler with the L2 flushed (the GEMVs), and its
    float64 errors."""
    builds = [b for b in ("fused",) + tuple(specs.GPU_VARIANTS)
              if any(r.get(b + "_ms") for r in rows)]
    ncu = any(r.get("fused_ncu_ms") for r in rows)
    head = ["batch x M x K x N", "torch.matmul ms", "TFLOP/s"]
    for b in builds:
        name = "default" if b == "fused" else b
        head += ["tfc %s ms" % name, "TFLOP/s", "vs torch"]
    if ncu:
        head += ["tfc default ms (ncu, L2 flushed)", "vs torch"]
    head.append("default vs float64: rel / worst row / max abs")
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---:" for _ in head) + "|"]
    for r in rows:
        def rate(key):
            return fmt(r["flop"] / r[key] / 1e9 if r.get(key) else None,
                       "%.3g")

        def vs(key):
            return ("%.2fx" % (r["torch_ms"] / r[key])
                    if r.get(key) and r.get("torch_ms") else "—")
        cells = ["%dx%dx%dx%d%s" % (r["batch"], r["M"], r["K"], r["N"],
                                   ", B as [N, K]" if r["weight"] else ""),
                 fmt(r.get("torch_ms"), "%.4f"), rate("torch_ms")]
        for b in builds:
            cells += [fmt(r.get(b + "_ms"), "%.4f"), rate(b + "_ms"),
                      vs(b + "_ms")]
        if ncu:
            cells += [fmt(r.get("fused_ncu_ms"), "%.4f"), vs("fused_ncu_ms")]
        f64 = r.get("f64")
        cells.append("%.1e / %.1e / %.1e" % (f64["rel"], f64["worst_row"],
                                             f64["max_abs"]) if f64 else "—")
        lines.append("| " + " | ".join(cells) + " |")
        lines += ["- " + n for n in r["notes"]]
    return lines
