"""The attention timing of the device check: each timing model's tfc builds
(tfc-run) against PyTorch's flash SDPA on the same inputs, then Triton's
flash attention on the same shapes; and its table."""

import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

import specs
from common import (check_against, fmt, math_attention, not_built,
                    once_ms, run_timed)

try:  # PyTorch >= 2.3
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:
    sdpa_kernel = None


def flops(m):
    f = 4.0 * m["B"] * m["H"] * m["S"] ** 2 * m["D"]
    return f / 2 if m["causal"] else f


class Peer:
    """PyTorch's attention on the same inputs: SDPA with the FLASH backend
    on a GPU; on the CPU (PyTorch 1.13 has no SDPA) a float32 math
    attention, as a smoke test of the timing code."""

    def __init__(self, device):
        self.device = device
        self.gpu = device.type == "cuda"
        if self.gpu and sdpa_kernel is not None:
            self.name = "SDPA flash"
        elif self.gpu:
            self.name = "SDPA (backend not forced: no sdpa_kernel)"
        else:
            self.name = "torch math f32 (CPU smoke test)"

    def context(self):
        if self.gpu and sdpa_kernel is not None:
            return sdpa_kernel(SDPBackend.FLASH_ATTENTION)
        return _Null()

    def __call__(self, q, k, v, causal):
        if self.gpu:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return math_attention(q, k, v, causal)

    def time(self, sets, causal, target_s):
        """Median and min ms over many runs, rotating input sets."""
        with self.context():
            for i in range(3):
                self(*sets[i % len(sets)], causal)
            t0 = self._once(sets[0], causal)
            n = int(min(200, max(10 if self.gpu else 3,
                                 target_s * 1e3 / max(t0, 1e-3))))
            if self.gpu:
                ev = [(torch.cuda.Event(enable_timing=True),
                       torch.cuda.Event(enable_timing=True)) for _ in range(n)]
                for i, (a, b) in enumerate(ev):
                    a.record()
                    self(*sets[i % len(sets)], causal)
                    b.record()
                torch.cuda.synchronize()
                times = [a.elapsed_time(b) for a, b in ev]
            else:
                times = []
                for i in range(n):
                    times.append(self._once(sets[i % len(sets)], causal))
        times.sort()
        return times[len(times) // 2], times[0], n

    def _once(self, qkv, causal):
        return once_ms(lambda: self(*qkv, causal), self.gpu)


class TritonPeer(Peer):
    """Triton's flash attention, a second peer: its tutorial's forward
    pass (tests/Integration/GPU/triton/generate.py, attention_tutorial: TMA
    descriptors, scale folded into exp2, causal as unmasked tiles then the
    diagonal block), compiled by the machine's Triton at its first call per
    head dimension, causality and warp count: 128 x 128 tiles, 2 stages,
    on 4 warps (the fewest PTX instructions per product on the
    interpreter, bench/gpu/triton_mix.py) and on 8 (the fewest machine
    instructions per score at D = 128, bench/gpu/sass_mix.py --triton);
    time_triton keeps the faster. `error` says why it cannot run (no GPU,
    no Triton, an API it lacks)."""

    BM = BN = 128
    WARPS = (4, 8)

    def __init__(self, device):
        super().__init__(device)
        self.name, self.error, self.bound = "Triton", None, {}
        self.warps = self.WARPS[0]
        if not self.gpu:
            self.error = "no GPU"
            return
        try:
            import triton
            from triton.tools.tensor_descriptor import TensorDescriptor
            sys.path.insert(0, os.path.join(
                os.path.dirname(os.path.abspath(__file__)), "..", "..",
                "tests", "Integration", "GPU", "triton"))
            import generate
            self.kernel = generate.attention_tutorial
            self.descriptor = TensorDescriptor.from_tensor
            self.name = "Triton %s" % triton.__version__
        except Exception as e:  # noqa: BLE001 (any reason not to run)
            self.error = "%s: %s" % (type(e).__name__, e)

    def context(self):
        return _Null()

    def __call__(self, q, k, v, causal, poison=False):
        """The output (a buffer kept per input set: the timed calls are the
        launches, as SDPA's are its call); NaN first where `poison`."""
        b, h, s, d = q.shape
        if s % self.BM:
            raise RuntimeError("S = %d is not a multiple of %d" % (s, self.BM))
        key = (q.data_ptr(), k.data_ptr(), v.data_ptr(), q.shape)
        if key not in self.bound:
            o = torch.empty_like(q)
            self.bound[key] = (o, [self.descriptor(t.view(b * h, s, d),
                                                   [1, self.BM, d])
                                   for t in (q, k, v, o)])
        o, descs = self.bound[key]
        if poison:
            o.fill_(float("nan"))
        self.kernel[(s // self.BM, b * h, 1)](
            *descs, s, 1.0 / math.sqrt(d), CAUSAL=causal, BM=self.BM,
            BN=self.BN, D=d, WS=False, num_warps=self.warps, num_stages=2)
        return o


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def input_sets(m, device, gen, l2_bytes):
    """Enough Q/K/V sets that rotating through them defeats the L2 (at most
    8); the first set is the one tfc-run also gets."""
    shape = (m["B"], m["H"], m["S"], m["D"])
    set_bytes = 4 * 2 * math.prod(shape)  # q, k, v, out in f16
    n = 1 if not l2_bytes else max(1, min(8, math.ceil(3 * l2_bytes /
                                                       set_bytes)))
    return [[torch.randn(shape, generator=gen, device=device,
                         dtype=torch.float32).to(torch.float16)
             for _ in range(3)] for _ in range(n)]


class Timing:
    """Times each timing model's builds with tfc-run, and the peer on the
    same inputs; one row (a dict) per model."""

    def __init__(self, base, run, device, seed, work, checks, clock, peer,
                 triton=None):
        self.base, self.run, self.device = base, run, device
        self.work, self.checks, self.clock, self.peer = work, checks, clock, \
            peer
        self.triton = triton
        self.gpu = device.type == "cuda"
        props = torch.cuda.get_device_properties(device) if self.gpu else None
        self.l2 = getattr(props, "L2_cache_size", 0) if props else 0
        self.gen = torch.Generator(device=device)
        self.gen.manual_seed(seed)
        self.target_s = 0.5 if self.gpu else 0.2  # timed seconds per number
        self.last = {}  # (build, D, causal) -> (S, ms): predicts other S

    def model(self, m, row):
        if self.clock.left() < 40:
            row["notes"].append("skipped: time budget spent")
            print("skip %s: time budget spent" % m["name"], flush=True)
            return
        sets = input_sets(m, self.device, self.gen, self.l2)
        paths = []
        for i, t in enumerate(sets[0]):
            paths.append(os.path.join(self.work, "t%d.npy" % i))
            np.save(paths[-1], t.cpu().numpy())
        row["sets"] = len(sets)
        expect = None
        try:
            row["peer_ms"], row["peer_min"], row["peer_n"] = self.peer.time(
                sets, m["causal"], self.target_s)
            with self.peer.context():
                expect = self.peer(*sets[0], m["causal"]).float()
        except RuntimeError as e:  # no flash kernel for this case, say
            row["notes"].append("%s failed: %s" %
                                (self.peer.name, str(e).splitlines()[0]))
        del sets[1:]
        if self.gpu:
            torch.cuda.synchronize()  # nothing of ours runs beside tfc-run
        for build in m["builds"]:
            self.build(m, build, paths, expect, row)
        print("time %-30s %s" % (m["name"], ", ".join(
            "%s %.3f ms" % (k[:-3], row[k]) for k in
            tuple(b + "_ms" for b in FUSED_BUILDS) +
            ("unfused_ms", "peer_ms", "triton_ms") if row.get(k))),
            flush=True)

    def time_triton(self, m, row):
        """Triton's time on fresh input sets of the model's shape, and its
        error against SDPA's output: a note on the row, not a failed
        check, where it cannot run or disagrees (it is not ours). Run
        after every other timing: a fault in its kernel would end this
        process's use of the GPU."""
        t = self.triton
        if t is None or t.error:
            if t is not None:
                row["notes"].append("%s not run: %s" % (t.name, t.error))
            return
        if self.clock.left() < 60:
            row["notes"].append("%s skipped: time budget" % t.name)
            return
        try:
            sets = input_sets(m, self.device, self.gen, self.l2)
            best = None
            for warps in t.WARPS:
                t.warps = warps
                timed = t.time(sets, m["causal"], self.target_s)
                if best is None or timed[0] < best[1][0]:
                    best = (warps, timed)
            t.warps = best[0]
            row["triton_ms"], row["triton_min"], row["triton_n"] = best[1]
            row["triton_warps"] = best[0]
            with self.peer.context():
                expect = self.peer(*sets[0], m["causal"]).float()
            got = t(*sets[0], m["causal"], poison=True).float()
            row["triton_err"] = float(torch.linalg.norm(got - expect) /
                                      torch.linalg.norm(expect))
            if not row["triton_err"] <= m["tol"]["fused"]:
                row["notes"].append(
                    "%s disagrees with SDPA at D=%d S=%d%s: rel.err %.1e, "
                    "its time left out" % (
                        t.name, m["D"], m["S"],
                        " causal" if m["causal"] else "", row["triton_err"]))
                row["triton_ms"] = None
        except Exception as e:  # noqa: BLE001 (Triton's, not ours)
            t.error = "%s: %s" % (type(e).__name__,
                                  (str(e).splitlines() or [""])[0][:200])
            row["notes"].append("%s failed: %s" % (t.name, t.error))

    def build(self, m, build, paths, expect, row):
        label = "%s %s" % (m["name"], build)
        if not_built(m, build, label, row, self.checks):
            return
        # Repeats for about target_s of timed runs, from the time at the
        # previous S (times grow as S^2); the first size gets a fixed count.
        key = (build, m["D"], m["causal"])
        predict = None
        if key in self.last:
            s0, t0 = self.last[key]
            predict = t0 * (m["S"] / s0) ** 2
        repeat, warmup = (20, 2) if self.gpu else (3, 1)
        if predict:
            repeat = int(min(30, max(3, self.target_s * 1e3 / predict)))
            warmup = 1 if predict > 500 else 2
        need = (predict or 0) * (repeat + warmup) / 1e3
        if need > self.clock.left() - 30:
            row["notes"].append("%s skipped: needs about %.0f s" %
                                (label, need))
            return
        out_path = os.path.join(self.work, "t_out.npy")
        ms = run_timed(self.run, os.path.join(self.base, m["paths"][build]),
                       paths, out_path, label, build, row, self.checks,
                       repeat=repeat, warmup=warmup,
                       timeout=min(180, 30 + 3 * need,
                                   self.clock.left() - 20))
        if ms is None:
            return
        self.last[key] = (m["S"], ms)
        row[build + "_ms"] = ms
        row[build + "_n"] = repeat
        if expect is None:
            return
        check_against(out_path, expect, self.device, m["tol"][build],
                      "%s vs %s" % (label, self.peer.name), build, row,
                      self.checks)


def run_timing(manifest, timing, rows):
    """Appends one row per timing model to rows, in the manifest's order,
    and times them in order of what they tell: S = specs.TARGET_S first
    (where the targets are set), then the longest; a spent budget skips
    the short ones."""
    pending = []
    for m in [m for m in manifest["models"] if m["group"] == "timing"]:
        row = {"name": m["name"], "B": m["B"], "H": m["H"], "D": m["D"],
               "S": m["S"], "causal": m["causal"], "flop": flops(m),
               "notes": [m["unfused_note"]] if "unfused_note" in m else []}
        rows.append(row)
        pending.append((m, row))
    pending.sort(key=lambda p: (p[0]["S"] != specs.TARGET_S, -p[0]["S"]))
    for m, row in pending:
        try:
            timing.model(m, row)
        except Exception as e:  # a bug here must not end the whole check
            timing.checks.add(False, m["name"], "check.py error: %s: %s" %
                              (type(e).__name__, e))


def run_triton_timing(manifest, timing, rows):
    """Triton's attention on the timing models' shapes, in the order
    run_timing took them (what the budget leaves)."""
    by_name = {r["name"]: r for r in rows}
    models = [m for m in manifest["models"] if m["group"] == "timing"]
    models.sort(key=lambda m: (m["S"] != specs.TARGET_S, -m["S"]))
    for m in models:
        if m["name"] in by_name:
            timing.time_triton(m, by_name[m["name"]])
            print("time %-30s Triton %s ms" % (m["name"], fmt(
                by_name[m["name"]].get("triton_ms"))), flush=True)


FUSED_BUILDS = ("fused",) + tuple(specs.GPU_VARIANTS)


def timing_table(rows, peer_name):
    """One row per shape: the peer, the unfused build, each fused build
    that was timed (ms, TFLOP/s, peer ms / ours) and the fastest of them."""
    builds = [b for b in FUSED_BUILDS if any(r.get(b + "_ms") for r in rows)]
    head = ["D", "S", "causal", "%s ms" % peer_name, "TFLOP/s",
            "tfc unfused ms", "TFLOP/s"]
    for b in builds:
        head += ["tfc %s ms" % b, "TFLOP/s", "%s vs SDPA" % b]
    head += ["fastest tfc", "vs SDPA", "vs unfused", "fused err vs SDPA"]
    triton = any(r.get("triton_ms") for r in rows)
    if triton:
        head += ["Triton ms", "TFLOP/s", "fastest tfc vs Triton"]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---" if h == "causal" else "---:"
                            for h in head) + "|"]
    notes = []
    for r in rows:
        def rate(key):
            return fmt(r["flop"] / r[key] / 1e9 if r.get(key) else None,
                       "%.3g")

        def ratio(other, ours):
            if r.get(ours) and r.get(other):
                return "%.2fx" % (r[other] / r[ours])
            return "—"
        cells = [str(r["D"]), str(r["S"]), "yes" if r["causal"] else "no",
                 fmt(r.get("peer_ms")), rate("peer_ms"),
                 fmt(r.get("unfused_ms")), rate("unfused_ms")]
        for b in builds:
            cells += [fmt(r.get(b + "_ms")), rate(b + "_ms"),
                      ratio("peer_ms", b + "_ms")]
        timed = [b for b in builds if r.get(b + "_ms")]
        best = min(timed, key=lambda b: r[b + "_ms"]) if timed else None
        cells += [best or "—",
                  ratio("peer_ms", best + "_ms") if best else "—",
                  ratio("unfused_ms", best + "_ms") if best else "—",
                  fmt(r.get("fused_err"), "%.1e")]
        if triton:
            cells += [fmt(r.get("triton_ms")) + (
                " (%d warps)" % r["triton_warps"] if r.get("triton_ms")
                else ""), rate("triton_ms"),
                      ratio("triton_ms", best + "_ms") if best else "—"]
        lines.append("| " + " | ".join(cells) + " |")
        for n in r["notes"]:
            if n not in notes:
                notes.append(n)
    return lines, notes
