"""The attention timing of the device check: each timing model's tfc builds
(tfc-run) against the peers on the same inputs (SDPA with the cuDNN and the
flash backends, FlashAttention-3), checked against float64 on sampled
rows; then the late peers (FA3 through PyTorch, Triton's flash attention)
on the same shapes; and its table."""

import math
import os
import sys

import torch
import torch.nn.functional as F

import accuracy
import specs
from common import (check_against, fmt, load_output, math_attention,
                    not_built, once_ms, queued_times, run_timed, save_tensor)

try:  # PyTorch >= 2.3
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:
    sdpa_kernel = None


def flops(m):
    f = 4.0 * m["B"] * m["H"] * m["S"] ** 2 * m["D"]
    return f / 2 if m["causal"] else f


# The peers, in the table's order: SDPA with the cuDNN backend forced, SDPA
# with the flash backend forced (FlashAttention-2 on Hopper), and
# FlashAttention-3 (flash_attn_interface, or PyTorch's registered FA3
# implementation of the flash backend). kind: (name, SDPBackend member).
PEERS = {"cudnn": ("SDPA cuDNN", "CUDNN_ATTENTION"),
         "flash": ("SDPA flash (FA2)", "FLASH_ATTENTION"),
         "fa3": ("FA3", None)}


class Peer:
    """An attention on the same inputs ([B, H, S, D], f16 or bf16): SDPA
    with a backend forced ("cudnn", "flash"), or FlashAttention-3 ("fa3":
    flash_attn_interface.flash_attn_func on [B, S, H, D] views of the same
    tensors; else PyTorch's "FA3" flash implementation, activated for the
    process: `late`, timed after every SDPA flash timing); on the CPU
    ("math") a float32 math attention, as a smoke test of the timing code.
    `error` says why it cannot run."""

    def __init__(self, device, kind="flash"):
        self.device, self.kind = device, kind
        self.gpu = device.type == "cuda"
        self.error, self.late, self.fa3 = None, False, None
        if kind == "math":
            self.name = "torch math f32 (CPU smoke test)"
            return
        self.name = PEERS[kind][0]
        if not self.gpu:
            self.error = "no GPU"
        elif kind == "fa3":
            self._find_fa3()
        elif sdpa_kernel is None:
            self.error = "no torch.nn.attention.sdpa_kernel"

    def _find_fa3(self):
        try:
            import flash_attn_interface
            self.fa3 = flash_attn_interface.flash_attn_func
            self.name = "FA3 (flash_attn_interface)"
            return
        except ImportError as e:
            why = "no flash_attn_interface (%s)" % e
        try:
            import torch.nn.attention as attention
            impls = attention.list_flash_attention_impls()
        except (ImportError, AttributeError):
            impls = []
            why += "; torch has no list_flash_attention_impls"
        if "FA3" in impls and sdpa_kernel is not None:
            self.name, self.late = "FA3 (torch's flash impl)", True
            return
        self.error = "not available: %s%s" % (
            why, "; torch lists no FA3 impl (%s)" % ", ".join(impls)
            if impls else "")

    def _activate_fa3(self):
        """PyTorch's FA3 impl as the flash backend (for the rest of the
        process); a RuntimeError, and `error` set, where it cannot."""
        import torch.nn.attention as attention
        try:
            if attention.current_flash_attention_impl() != "FA3":
                attention.activate_flash_attention_impl("FA3")
        except Exception as e:  # noqa: BLE001 (its package, say, missing)
            self.error = "not available: torch lists an FA3 impl, but " \
                "activating it failed: %s: %s" % (
                    type(e).__name__, (str(e).splitlines() or [""])[0][:160])
            raise RuntimeError(self.error) from e

    def context(self):
        if self.kind in ("cudnn", "flash") or self.late:
            if self.late:
                self._activate_fa3()
            backend = PEERS["flash" if self.late else self.kind][1]
            return sdpa_kernel(getattr(SDPBackend, backend))
        return _Null()

    def __call__(self, q, k, v, causal):
        if self.kind == "math":
            return math_attention(q, k, v, causal)
        if self.fa3 is not None:
            o = self.fa3(q.transpose(1, 2), k.transpose(1, 2),
                         v.transpose(1, 2), causal=causal)
            o = o[0] if isinstance(o, tuple) else o
            return o.transpose(1, 2)
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def time(self, sets, causal, target_s):
        """Median and min ms over many runs, rotating input sets; on the
        GPU the calls are queued behind a sleeping kernel (the GPU's time
        only)."""
        with self.context():
            for i in range(3):
                self(*sets[i % len(sets)], causal)
            t0 = once_ms(lambda: self(*sets[0], causal), self.gpu)
            n = int(min(200, max(10 if self.gpu else 3,
                                 target_s * 1e3 / max(t0, 1e-3))))
            it = iter(range(n))
            times = queued_times(
                lambda: self(*sets[next(it) % len(sets)], causal), n,
                self.gpu)
        times.sort()
        return times[len(times) // 2], times[0], n


def make_peers(device):
    """The peers of this machine: cuDNN, flash, FA3 on a GPU (those that
    cannot run say why); the math smoke test on the CPU."""
    if device.type != "cuda":
        return [Peer(device, "math")]
    return [Peer(device, kind) for kind in PEERS]


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


DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


def input_sets(m, device, gen, l2_bytes):
    """Enough Q/K/V sets that rotating through them defeats the L2 (at most
    8); the first set is the one tfc-run also gets."""
    shape = (m["B"], m["H"], m["S"], m["D"])
    set_bytes = 4 * 2 * math.prod(shape)  # q, k, v, out in 16 bits
    n = 1 if not l2_bytes else max(1, min(8, math.ceil(3 * l2_bytes /
                                                       set_bytes)))
    return [[torch.randn(shape, generator=gen, device=device,
                         dtype=torch.float32).to(DTYPES[m["dtype"]])
             for _ in range(3)] for _ in range(n)]


def reference_rows(m, qkv, gen):
    """The float64 reference of a subsample of query rows of `qkv` (the
    same rows of every head): (rows, reference [B, H, rows, D])."""
    rows = accuracy.sample_rows(m["Sq"], gen)
    return rows, accuracy.attention64(*qkv, m["causal"], rows)


def check_rows(m, got, rows, ref, label, checks, row=None, key=None):
    """`got` [B, H, Sq, D] at the query rows `rows` against their float64
    reference `ref`: norm-wise, worst row and largest absolute error
    within the dtype's bound (bf16: its rounding floor + margin). Returns
    the stats."""
    dtype = DTYPES[m["dtype"]]
    got = got[:, :, rows.to(got.device)].double().cpu().numpy()
    ref = ref.cpu().numpy()
    floors = accuracy.rounding_floor(
        ref, lambda r: torch.from_numpy(r).to(dtype).double().numpy())
    st = accuracy.stats(got, ref)
    ok, line = accuracy.verdict(st, specs.bounds(m["tol"]["fused"],
                                                 m["dtype"], floors))
    checks.add(ok, label, "%s; %d rows of each head against float64" % (
        line, len(rows)))
    if row is not None:
        row[key] = st
    return st


class Timing:
    """Times each timing model's builds with tfc-run, and the peers on the
    same inputs; one row (a dict) per model."""

    def __init__(self, base, run, device, seed, work, checks, clock, peers,
                 triton=None):
        self.base, self.run, self.device = base, run, device
        self.work, self.checks, self.clock = work, checks, clock
        self.peers = peers
        self.triton = triton
        self.gpu = device.type == "cuda"
        props = torch.cuda.get_device_properties(device) if self.gpu else None
        self.l2 = getattr(props, "L2_cache_size", 0) if props else 0
        self.gen = torch.Generator(device=device)
        self.gen.manual_seed(seed)
        self.cpu_gen = torch.Generator()
        self.cpu_gen.manual_seed(seed)
        self.target_s = 0.5 if self.gpu else 0.2  # timed seconds per number
        self.last = {}  # (build, dtype, D, causal) -> (S, ms): predicts S

    def time_peer(self, peer, m, sets, row):
        """The peer's time on `sets` (row["peer_KIND_ms"]); its output on
        the first set, or None."""
        if peer.error:
            note = "%s: %s" % (peer.name, peer.error)
            if note not in row["notes"]:
                row["notes"].append(note)
            return None
        try:
            key = "peer_%s" % peer.kind
            row[key + "_ms"], row[key + "_min"], row[key + "_n"] = \
                peer.time(sets, m["causal"], self.target_s)
            with peer.context():
                return peer(*sets[0], m["causal"])
        except RuntimeError as e:  # no kernel of this backend for the case
            row["notes"].append("%s failed at %s D=%d S=%d%s: %s" % (
                peer.name, m["dtype"], m["D"], m["S"],
                " causal" if m["causal"] else "",
                (str(e).splitlines() or [""])[0][:160]))
            return None

    def model(self, m, row):
        if self.clock.left() < 40:
            row["notes"].append("skipped: time budget spent")
            print("skip %s: time budget spent" % m["name"], flush=True)
            return
        sets = input_sets(m, self.device, self.gen, self.l2)
        paths = []
        for i, t in enumerate(sets[0]):
            paths.append(os.path.join(self.work, "t%d.npy" % i))
            save_tensor(t, paths[-1])
        row["sets"] = len(sets)
        expect = None
        for peer in self.peers:
            if peer.late:
                continue
            out = self.time_peer(peer, m, sets, row)
            if out is not None and expect is None:
                expect, row["checked_against"] = out.float(), peer.name
        rows, ref = reference_rows(m, sets[0], self.cpu_gen)
        if expect is not None:
            check_rows(m, expect, rows, ref, "%s %s vs float64 (info)" % (
                m["name"], row["checked_against"]), _Info(), row,
                "peer_f64")
        del sets[1:]
        if self.gpu:
            torch.cuda.synchronize()  # nothing of ours runs beside tfc-run
        for build in m["builds"]:
            got = self.build(m, build, paths, expect, row)
            if got is not None:
                check_rows(m, got, rows, ref, "%s %s vs float64" % (
                    m["name"], build), self.checks, row, build + "_f64")
        print("time %-30s %s" % (m["name"], ", ".join(
            "%s %.3f ms" % (k[:-3], row[k]) for k in sorted(row)
            if k.endswith("_ms") and row[k])), flush=True)

    def time_late(self, m, row):
        """The late peers (FA3 through PyTorch's flash impl, which replaces
        FA2 for the rest of the process; Triton, whose fault would end the
        process's use of the GPU) on fresh input sets of the model's shape,
        and their error against the first peer's output: a note on the
        row, not a failed check, where one cannot run or disagrees."""
        for peer in [p for p in self.peers if p.late]:
            if self.clock.left() < 40:
                row["notes"].append("%s skipped: time budget" % peer.name)
                continue
            sets = input_sets(m, self.device, self.gen, self.l2)
            self.time_peer(peer, m, sets, row)
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
            got = t(*sets[0], m["causal"], poison=True).float()
            rows, ref = reference_rows(m, sets[0], self.cpu_gen)
            st = check_rows(m, got, rows, ref, "%s %s vs float64 (info)" % (
                m["name"], t.name), _Info(), row, "triton_f64")
            row["triton_err"] = st["rel"]
            if not st["rel"] <= specs.bound(m["tol"]["fused"], m["dtype"],
                                             2.0**-9):
                row["notes"].append(
                    "%s disagrees with float64 at %s D=%d S=%d%s: rel.err "
                    "%.1e, its time left out" % (
                        t.name, m["dtype"], m["D"], m["S"],
                        " causal" if m["causal"] else "", st["rel"]))
                row["triton_ms"] = None
        except Exception as e:  # noqa: BLE001 (Triton's, not ours)
            t.error = "%s: %s" % (type(e).__name__,
                                  (str(e).splitlines() or [""])[0][:200])
            row["notes"].append("%s failed: %s" % (t.name, t.error))

    def build(self, m, build, paths, expect, row):
        """Times one build; checks its output against the first peer's
        `expect`; returns the output (float32) or None."""
        label = "%s %s" % (m["name"], build)
        if not_built(m, build, label, row, self.checks):
            return None
        # Repeats for about target_s of timed runs, from the time at the
        # previous S (times grow as S^2); the first size gets a fixed count.
        key = (build, m["dtype"], m["D"], m["causal"])
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
            return None
        out_path = os.path.join(self.work, "t_out.npy")
        ms = run_timed(self.run, os.path.join(self.base, m["paths"][build]),
                       paths, out_path, label, build, row, self.checks,
                       repeat=repeat, warmup=warmup,
                       timeout=min(180, 30 + 3 * need,
                                   self.clock.left() - 20))
        if ms is None:
            return None
        self.last[key] = (m["S"], ms)
        row[build + "_ms"] = ms
        row[build + "_n"] = repeat
        if expect is None:
            return load_output(out_path, m["dtype"], self.device)
        # Two roundings to the output type apart (bf16: 2^-9 each).
        tol = specs.bound(m["tol"][build], m["dtype"], 2 * 2.0**-9)
        return check_against(out_path, expect, self.device, tol,
                             "%s vs %s" % (label, row["checked_against"]),
                             build, row, self.checks, m["dtype"])


class _Info:
    """A Checks whose lines are information, never a failure."""

    def add(self, ok, label, detail=""):
        print("info %-52s %s" % (label, detail), flush=True)
        return ok


def timing_order(models):
    """What the timing models tell, most first: S = specs.TARGET_S (where
    the targets are set), then the longest; f16 before bf16."""
    return sorted(models, key=lambda m: (m["S"] != specs.TARGET_S, -m["S"],
                                         m["dtype"] != "f16"))


def run_timing(manifest, timing, rows):
    """Appends one row per timing model to rows, in the manifest's order,
    and times them in timing_order (a spent budget skips the last)."""
    by_name = {}
    for m in [m for m in manifest["models"] if m["group"] == "timing"]:
        row = {"name": m["name"], "B": m["B"], "H": m["H"], "D": m["D"],
               "S": m["S"], "dtype": m["dtype"], "causal": m["causal"],
               "flop": flops(m),
               "notes": [m["unfused_note"]] if "unfused_note" in m else []}
        rows.append(row)
        by_name[m["name"]] = row
    for m in timing_order([m for m in manifest["models"]
                           if m["group"] == "timing"]):
        try:
            timing.model(m, by_name[m["name"]])
        except Exception as e:  # a bug here must not end the whole check
            timing.checks.add(False, m["name"], "check.py error: %s: %s" %
                              (type(e).__name__, e))


def run_late_timing(manifest, timing, rows):
    """The late peers (FA3 through PyTorch, Triton) on the timing models'
    shapes, in timing_order (what the budget leaves)."""
    by_name = {r["name"]: r for r in rows}
    for m in timing_order([m for m in manifest["models"]
                           if m["group"] == "timing"]):
        if m["name"] in by_name:
            r = by_name[m["name"]]
            timing.time_late(m, r)
            print("time %-30s late peers: %s" % (m["name"], ", ".join(
                "%s %s ms" % (k[:-3], fmt(r.get(k))) for k in sorted(r)
                if k.endswith("_ms") and (k == "triton_ms" or k.startswith(
                    "peer_fa3")))), flush=True)


FUSED_BUILDS = ("fused",) + tuple(specs.GPU_VARIANTS)


def timing_table(rows, peers):
    """One row per shape: each peer (ms, TFLOP/s), the unfused build, each
    fused build that was timed (ms, TFLOP/s, first peer's ms / ours), the
    fastest of them and its ratio to every peer, and its float64 errors."""
    peers = [p for p in peers
             if any(r.get("peer_%s_ms" % p.kind) for r in rows)]
    builds = [b for b in FUSED_BUILDS if any(r.get(b + "_ms") for r in rows)]
    first = peers[0] if peers else None
    head = ["dtype", "D", "S", "causal"]
    for p in peers:
        head += ["%s ms" % p.name, "TFLOP/s"]
    head += ["tfc unfused ms", "TFLOP/s"]
    for b in builds:
        head += ["tfc %s ms" % b, "TFLOP/s"]
        if first:
            head.append("%s vs %s" % (b, first.name))
    head.append("fastest tfc")
    head += ["vs %s" % p.name for p in peers]
    head += ["vs unfused", "fused vs float64: rel / worst row / max abs"]
    triton = any(r.get("triton_ms") for r in rows)
    if triton:
        head += ["Triton ms", "TFLOP/s", "fastest tfc vs Triton"]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---" if h in ("causal", "dtype") else "---:"
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
        cells = [r.get("dtype", "f16"), str(r["D"]), str(r["S"]),
                 "yes" if r["causal"] else "no"]
        for p in peers:
            key = "peer_%s_ms" % p.kind
            cells += [fmt(r.get(key)), rate(key)]
        cells += [fmt(r.get("unfused_ms")), rate("unfused_ms")]
        for b in builds:
            cells += [fmt(r.get(b + "_ms")), rate(b + "_ms")]
            if first:
                cells.append(ratio("peer_%s_ms" % first.kind, b + "_ms"))
        timed = [b for b in builds if r.get(b + "_ms")]
        best = min(timed, key=lambda b: r[b + "_ms"]) if timed else None
        cells.append(best or "—")
        cells += [ratio("peer_%s_ms" % p.kind, best + "_ms") if best
                  else "—" for p in peers]
        f64 = r.get("fused_f64")
        cells += [ratio("unfused_ms", best + "_ms") if best else "—",
                  "%.1e / %.1e / %.1e" % (f64["rel"], f64["worst_row"],
                                          f64["max_abs"]) if f64 else "—"]
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
