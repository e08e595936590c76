"""The decode attention timing of the device check: each decode timing
model's tfc builds (the split-KV decode kernel and its tunings, the tiled
kernels) against PyTorch's SDPA with grouped-query heads on the same f16
inputs; and its table."""

import os
import shutil

import torch
import torch.nn.functional as F

import accuracy
import ncu_profile
import specs
from attention_timing import check_rows
from common import (QUEUED, L2Flush, check_against, fmt, hbm_peak_gbps,
                    load_output, math_attention, not_built, queued_times,
                    run_timed, save_tensor)


def kv_bytes(m):
    """The bytes of K and V in f16, each read once: what one decode step
    reads at the least (Q and the output are 1/Skv of it)."""
    return 2.0 * m["B"] * m["Hkv"] * m["Skv"] * m["D"] * 2


class DecodeTiming:
    """Times each decode timing model's builds (the split-KV decode kernel:
    "fused"; the tiled kernels: "tiled") with tfc-run and PyTorch's
    attention on the same f16 inputs, and checks our outputs against
    PyTorch's. One row (a dict) per model."""

    QUEUED = QUEUED  # PyTorch calls queued behind one sleeping kernel

    def __init__(self, base, run, device, seed, work, checks, clock):
        self.base, self.run, self.device = base, run, device
        self.work, self.checks, self.clock = work, checks, clock
        self.gpu = device.type == "cuda"
        props = torch.cuda.get_device_properties(device) if self.gpu else None
        self.l2 = getattr(props, "L2_cache_size", 0) if props else 0
        self.gen = torch.Generator(device=device)
        self.gen.manual_seed(seed + 3)
        self.target_s = 0.3 if self.gpu else 0.1  # timed seconds per number
        self.flush = L2Flush(device, self.l2)
        self.ncu = shutil.which("ncu") if self.gpu else None
        peak, card = hbm_peak_gbps(device)
        self.hbm = ("the %s's HBM peak is about %d GB/s" % (card, peak)
                    if peak else "%s: HBM peak unknown" % card)

    @property
    def peer_name(self):
        return ("SDPA enable_gqa" if self.gpu else
                "torch math f32 (CPU smoke test)")

    def attention(self, q, k, v):
        """PyTorch's decode attention: SDPA with grouped-query heads on the
        GPU (its own choice of backend); on the CPU (PyTorch 1.13 has no
        SDPA) K and V heads repeated and a float32 math attention."""
        if self.gpu:
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        return math_attention(q, k, v)

    def peer_times(self, qkv, n):
        """n times (ms) of PyTorch's attention, kernel only: on the GPU the
        calls queued behind a sleeping kernel (a decode step takes tens of
        microseconds, about what Python takes to launch one), the L2
        flushed before each (K and V come from HBM)."""
        return queued_times(lambda: self.attention(*qkv), n, self.gpu,
                            self.flush, self.QUEUED)

    def model(self, m, row):
        if self.clock.left() < 30:
            row["notes"].append("%s skipped: time budget spent" % m["name"])
            print("skip %s: time budget spent" % m["name"], flush=True)
            return
        shapes = [(m["B"], m["H"], 1, m["D"])] + \
            [(m["B"], m["Hkv"], m["Skv"], m["D"])] * 2
        qkv = [torch.randn(s, generator=self.gen, device=self.device,
                           dtype=torch.float32).to(torch.float16)
               for s in shapes]
        paths = []
        for i, t in enumerate(qkv):
            paths.append(os.path.join(self.work, "d%d.npy" % i))
            save_tensor(t, paths[-1])
        if self.l2 and row["bytes"] <= self.l2:
            row["notes"].append(
                "%s: K and V (%.1f MB) fit in the L2 (%.0f MB) and every "
                "tfc-run run reads the same ones: tfc-run's GB/s are partly "
                "the L2's (the ncu column and PyTorch's are flushed)" % (
                    m["name"], row["bytes"] / 1e6, self.l2 / 1e6))
        if self.gpu and not hasattr(torch.cuda, "_sleep"):
            row["notes"].append("%s: no torch.cuda._sleep: the %s times "
                                "include Python's launches" %
                                (m["name"], self.peer_name))
        expect = None
        try:
            for _ in range(3):
                self.attention(*qkv)
            t0 = sorted(self.peer_times(qkv, 5))[2]
            n = int(min(200, max(10 if self.gpu else 3,
                                 self.target_s * 1e3 / max(t0, 1e-3))))
            times = sorted(self.peer_times(qkv, n))
            row["torch_ms"], row["torch_n"] = times[len(times) // 2], n
            row["torch_gbps"] = row["bytes"] / row["torch_ms"] / 1e6
            expect = self.attention(*qkv).float()
        except RuntimeError as e:  # no kernel for this case, say
            row["notes"].append("%s: %s failed: %s" % (
                m["name"], self.peer_name, str(e).splitlines()[0]))
        if self.gpu:
            torch.cuda.synchronize()  # nothing of ours runs beside tfc-run
        ref = accuracy.attention64(*qkv, False)
        for build in m["builds"]:
            got = self.build(m, build, paths, expect, row)
            if got is not None:
                check_rows(m, got, torch.arange(1), ref,
                           "%s %s vs float64" % (m["name"], build),
                           self.checks, row, build + "_f64")
        if self.ncu and "fused" in m["paths"] and self.clock.left() > 60:
            row["fused_ncu_ms"], why = ncu_profile.kernel_ms(
                self.ncu, self.run.path, os.path.join(
                    self.base, m["paths"]["fused"]), paths,
                os.path.join(self.work, "d_out.npy"))
            if why:
                row["notes"].append("%s: ncu: %s" % (m["name"], why))
            elif row["fused_ncu_ms"]:
                row["fused_ncu_gbps"] = row["bytes"] / row["fused_ncu_ms"] / 1e6
        print("time %-30s %s" % (m["name"], ", ".join(
            "%s %.4f ms" % (k[:-3], row[k]) for k in row
            if k.endswith("_ms"))), flush=True)

    def build(self, m, build, paths, expect, row):
        label = "%s %s" % (m["name"], build)
        if not_built(m, build, label, row, self.checks):
            return None
        if self.clock.left() < 20:
            row["notes"].append("%s skipped: time budget spent" % label)
            return None
        # Repeats for about target_s of timed runs, at the time of the
        # build timed before (the tiled kernels can take 10x that: still
        # well under a second at these sizes).
        predict = row.get("fused_ms") or row.get("torch_ms") or 1.0
        repeat = int(min(200 if self.gpu else 20,
                         max(3, self.target_s * 1e3 / max(predict, 1e-3))))
        out_path = os.path.join(self.work, "d_out.npy")
        ms = run_timed(self.run, os.path.join(self.base, m["paths"][build]),
                       paths, out_path, label, build, row, self.checks,
                       repeat=repeat, warmup=3,
                       timeout=min(120, self.clock.left() - 15))
        if ms is None:
            return None
        row[build + "_ms"], row[build + "_n"] = ms, repeat
        row[build + "_gbps"] = row["bytes"] / ms / 1e6
        if expect is None:
            return load_output(out_path, m["dtype"], self.device)
        return check_against(out_path, expect, self.device, m["tol"][build],
                             "%s vs %s" % (label, self.peer_name), build,
                             row, self.checks, m["dtype"])


def run_decode_timing(manifest, timing, rows):
    """Appends one row per decode timing model to rows and times it."""
    for m in [m for m in manifest["models"]
              if m["group"] == "decode_timing"]:
        row = {"name": m["name"], "B": m["B"], "H": m["H"], "Hkv": m["Hkv"],
               "Skv": m["Skv"], "D": m["D"], "bytes": kv_bytes(m),
               "peer": timing.peer_name, "hbm": timing.hbm, "notes": []}
        rows.append(row)
        try:
            timing.model(m, row)
        except Exception as e:  # a bug here must not end the whole check
            timing.checks.add(False, m["name"], "check.py error: %s: %s" %
                              (type(e).__name__, e))


def decode_table(rows):
    """One row per decode shape: PyTorch, then each tfc build (ms, GB/s of
    K and V), and the decode kernel's ratios to the tiled kernels and to
    PyTorch (t_other / t_fused: above 1x, the decode kernel is faster)."""
    builds = [b for b in ("fused",) + tuple(specs.DECODE_BUILDS)
              if any(r.get(b + "_ms") for r in rows)]
    head = ["B", "Hq/Hkv", "Skv", "K+V MB", "%s ms" % rows[0]["peer"],
            "GB/s"]
    for b in builds:
        head += ["tfc %s ms" % b, "GB/s"]
    ncu = any(r.get("fused_ncu_ms") for r in rows)
    if ncu:
        head += ["tfc fused ms (ncu, L2 flushed)", "GB/s"]
    head += ["fused vs tiled", "fused vs torch", "fused err vs torch",
             "fused vs float64: rel / worst row / max abs",
             "fastest decode build", "vs torch"]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---:" for _ in head) + "|"]
    notes = []
    for r in rows:
        def ratio(other):
            if r.get(other) and r.get("fused_ms"):
                return "%.2fx" % (r[other] / r["fused_ms"])
            return "—"
        cells = [str(r["B"]), "%d/%d" % (r["H"], r["Hkv"]), str(r["Skv"]),
                 "%.1f" % (r["bytes"] / 1e6), fmt(r.get("torch_ms"), "%.4f"),
                 fmt(r.get("torch_gbps"), "%.0f")]
        for b in builds:
            cells += [fmt(r.get(b + "_ms"), "%.4f"),
                      fmt(r.get(b + "_gbps"), "%.0f")]
        if ncu:
            cells += [fmt(r.get("fused_ncu_ms"), "%.4f"),
                      fmt(r.get("fused_ncu_gbps"), "%.0f")]
        f64 = r.get("fused_f64")
        cells += [ratio("tiled_ms"), ratio("torch_ms"),
                  fmt(r.get("fused_err"), "%.1e"),
                  "%.1e / %.1e / %.1e" % (f64["rel"], f64["worst_row"],
                                          f64["max_abs"]) if f64 else "—"]
        # The decode kernel's builds (all but the tiled kernels).
        timed = [b for b in builds if b != "tiled" and r.get(b + "_ms")]
        best = min(timed, key=lambda b: r[b + "_ms"]) if timed else None
        cells += [best or "—",
                  "%.2fx" % (r["torch_ms"] / r[best + "_ms"])
                  if best and r.get("torch_ms") else "—"]
        lines.append("| " + " | ".join(cells) + " |")
        notes += [n for n in r["notes"] if n not in notes]
    return lines, notes
