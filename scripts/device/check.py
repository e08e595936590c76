"""Run the models prepare.py compiled: numerics against float64 references,
then attention timings against PyTorch's flash SDPA, GEMM timings against
torch.matmul, decode attention timings against PyTorch's SDPA, and last
Triton's flash attention on the attention timing's shapes. Markdown tables
at the end (stdout and OUT/device-check.md).

usage: check.py --manifest .device/manifest.json --tfc-run PATH --out DIR
                [--budget SECONDS] [--seed N]

On the device machine it uses the GPU (references in float64 there, SDPA
with the FLASH backend forced, CUDA events). Without a GPU (the dry run,
PyTorch 1.13 on the CPU) the same code runs on the CPU, and the SDPA column
is a float32 math attention timed with a wall clock: a smoke test only.

Exit status: 0 when every numerics check passed, 1 otherwise (a model that
did not build or load, a non-finite output, an error over its tolerance, a
check skipped for lack of time). Timings never fail the run, except that the
timed tfc builds' outputs must agree with PyTorch's on the timing inputs
too (and a timed build that fails to run is a failed check).
"""

import argparse
import datetime
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decoders  # noqa: E402
import minilm  # noqa: E402
import refs  # noqa: E402
import specs  # noqa: E402

try:  # PyTorch >= 2.3
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:
    sdpa_kernel = None

NP_FILE_DTYPE = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}


# ---------------------------------------------------------------- arrays

def encode(x, dtype):
    """float32/float64 values -> the array tfc-run reads (bf16: '<u2' bits,
    rounded to nearest even)."""
    if dtype != "bf16":
        return np.ascontiguousarray(x, dtype=NP_FILE_DTYPE[dtype])
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def decode(a, dtype):
    """The array tfc-run wrote (or read) -> float64 values."""
    if dtype == "bf16":
        a = (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float64)


def draw(rng, spec):
    shape, gen = tuple(spec["shape"]), spec["gen"]
    if gen["kind"] == "normal":
        return gen["shift"] + gen["scale"] * rng.standard_normal(shape)
    if gen["kind"] == "padding_mask":  # [B,1,1,Skv]: batch b hides 3b+1 keys
        m = np.zeros(shape)
        for b in range(shape[0]):
            m[b, ..., shape[-1] - 1 - 3 * b:] = -np.inf
        return m
    if gen["kind"] == "keep_mask":  # [B,S] of 0/1: batch b pads 3b+2
        m = np.ones(shape)
        for b in range(shape[0]):
            m[b, shape[-1] - 2 - 3 * b:] = 0
        return m
    raise ValueError("unknown generator %r" % gen)


def rel_err(got, ref):
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-300))


# ---------------------------------------------------------------- checks

class Checks:
    def __init__(self):
        self.rows = []  # (ok, label, detail)

    def add(self, ok, label, detail=""):
        self.rows.append((ok, label, detail))
        print("%s %-52s %s" % ("ok  " if ok else "FAIL", label, detail),
              flush=True)
        return ok

    @property
    def failed(self):
        return [r for r in self.rows if not r[0]]


# The parts of the check, in the order they run.
PHASES = ("numerics", "models", "timing", "gemm", "decode", "triton",
          "sanitizer")
TIMING_PHASES = {"timing", "gemm", "decode", "triton"}


class Clock:
    def __init__(self, budget):
        self.start = time.monotonic()
        self.budget = budget

    def left(self):
        return self.budget - (time.monotonic() - self.start)

    def elapsed(self):
        return time.monotonic() - self.start


class TfcRun:
    """tfc-run with a timeout; errors come back as one line."""

    def __init__(self, path, extra):
        self.path = path
        self.extra = extra
        self.prefix = []    # arguments between path and the model
        self.timeouts = 0   # after one hang, numerics get shorter timeouts
        self.once = False   # run each model once, whatever `repeat` says
        self.timeout_scale = 1.0
        # build -> the model it hung on: the build's later runs are skipped
        # (a kernel that never finishes would eat the budget model by model).
        self.hung = {}

    def __call__(self, lib, inputs, output, timeout, repeat=0, warmup=0,
                 weights=None, build=None):
        if build in self.hung:
            return None, ("not run: the %s build hung on %s" %
                          (build, self.hung[build]))
        cmd = [self.path] + self.prefix + [lib] + self.extra
        if weights:
            cmd += ["--weights", weights]
        for p in inputs:
            cmd += ["--input", p]
        for p in output if isinstance(output, (list, tuple)) else [output]:
            cmd += ["--output", p]
        if repeat and not self.once:
            cmd += ["--repeat", str(repeat), "--warmup", str(warmup)]
        timeout *= self.timeout_scale
        # Its own process group, so that a timeout kills whatever it started.
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
        try:
            stdout, stderr = p.communicate(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            self.timeouts += 1
            if build is not None:
                self.hung[build] = os.path.basename(lib)
            return None, "timed out after %.0f s (killed)" % timeout
        if p.returncode != 0:
            lines = [l for l in (stderr + stdout).splitlines() if l.strip()]
            why = ("killed by signal %d" % -p.returncode if p.returncode < 0
                   else "exit %d" % p.returncode)
            return None, (lines[-1] + " (%s)" % why if lines else why)
        return stdout, None


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


def run_sanitizer(manifest, base, tfc_run, device, seed, work, checks, clock):
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
            check_model(spec, base, run, device, rng, work, checks, clock)


def median_ms(stdout):
    m = re.search(r"median ([0-9.]+) ms", stdout or "")
    return float(m.group(1)) if m else None


def run_numerics(manifest, base, run, device, seed, work, checks, clock):
    rng = np.random.default_rng(seed)
    for spec in [m for m in manifest["models"] if m["group"] == "numerics"]:
        try:
            check_model(spec, base, run, device, rng, work, checks, clock)
        except Exception as e:  # a bug here must not end the whole check
            checks.add(False, spec["name"], "check.py error: %s: %s" %
                       (type(e).__name__, e))


def check_model(spec, base, run, device, rng, work, checks, clock):
    name, dtype = spec["name"], spec["dtype"]
    # Inputs: drawn here, rounded to their dtype, written for tfc-run;
    # the reference reads the same rounded values in float64.
    paths, values = [], {}
    for i, inp in enumerate(spec["inputs"]):
        a = encode(draw(rng, inp), inp["dtype"])
        paths.append(os.path.join(work, "in%d.npy" % i))
        np.save(paths[-1], a)
        values[inp["name"]] = torch.from_numpy(
            decode(a, inp["dtype"])).to(device)
    ref = refs.reference(spec, values).cpu().numpy()
    floor = rel_err(decode(encode(ref, dtype), dtype), ref)
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
        tol = specs.bound(spec["tol"][build], dtype, floor)
        finite = bool(np.all(np.isfinite(got)))
        e = rel_err(got, ref)
        checks.add(finite and e <= tol, label,
                   "rel.err %.2e (tol %.1e, %s rounding floor %.1e)%s" %
                   (e, tol, dtype, floor,
                    "" if finite else ", NON-FINITE values"))
    if "fused" in outs and "unfused" in outs:
        tol = specs.bound(spec["tol"]["unfused"], dtype, floor)
        d = float(np.linalg.norm(outs["fused"] - outs["unfused"]) /
                  max(np.linalg.norm(ref), 1e-300))
        checks.add(d <= tol, "%s fused vs unfused" % name,
                   "rel.diff %.2e (tol %.1e)" % (d, tol))


# ---------------------------------------------------------------- timing

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
        q, k, v = q.float(), k.float(), v.float()
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        if causal:
            n = s.shape[-1]
            s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1),
                              -math.inf)
        return torch.softmax(s, -1) @ v

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
        if self.gpu:
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            a.record()
            self(*qkv, causal)
            b.record()
            torch.cuda.synchronize()
            return a.elapsed_time(b)
        t = time.perf_counter()
        self(*qkv, causal)
        return (time.perf_counter() - t) * 1e3


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


def not_built(m, build, label, row, checks):
    """Whether `build` of `m` failed to compile: a note on the row, and a
    failed check unless it is the unfused build."""
    error = m.get("errors", {}).get(build)
    if error:
        row["notes"].append("%s not built: %s" % (label, error))
        if build != "unfused":
            checks.add(False, label, "not built: " + error)
    return bool(error)


def run_timed(run, lib, paths, out_path, label, build, row, checks,
              **options):
    """Runs `lib` on `paths` with tfc-run's timing (`options`: repeat,
    warmup, timeout), its output to `out_path`; the median ms, or None
    after a note on the row (and a failed check unless unfused)."""
    if os.path.exists(out_path):
        os.remove(out_path)
    stdout, err = run(lib, paths, out_path, build=build, **options)
    ms = median_ms(stdout)
    if err or ms is None:
        err = err or "tfc-run printed no time"
        row["notes"].append("%s: %s" % (label, err))
        if build != "unfused":
            checks.add(False, label, err)
        return None
    return ms


def check_against(out_path, expect, device, tol, label, build, row, checks):
    """The output at `out_path` against the peer's `expect`: its relative
    error on the row (build_err) and a check within `tol`."""
    got = torch.from_numpy(np.load(out_path)).to(device).float()
    finite = bool(torch.isfinite(got).all())
    e = float(torch.linalg.norm(got - expect) / torch.linalg.norm(expect))
    row[build + "_err"] = e
    checks.add(finite and e <= tol, label, "rel.err %.2e (tol %.0e)%s" % (
        e, tol, "" if finite else ", NON-FINITE values"))


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

    def torch_ms():
        if not gpu:
            t0 = time.perf_counter()
            torch.matmul(a.float(), b.float())
            return (time.perf_counter() - t0) * 1e3
        e0, e1 = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        e0.record()
        torch.matmul(a, b)
        e1.record()
        torch.cuda.synchronize()
        return e0.elapsed_time(e1)
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


# ---------------------------------------------------------------- decode

# What the GB/s of a decode step are read against: the H200's HBM3e
# bandwidth, about 4.8 TB/s.
HBM_PEAK_GBPS = 4800
# PyTorch's decode calls are queued behind a kernel that sleeps this many
# clock cycles (about 25 ms at the H200's 1.98 GHz), longer than Python
# takes to queue DecodeTiming.QUEUED calls.
SLEEP_CYCLES = 50000000


def kv_bytes(m):
    """The bytes of K and V in f16, each read once: what one decode step
    reads at the least (Q and the output are 1/Skv of it)."""
    return 2.0 * m["B"] * m["Hkv"] * m["Skv"] * m["D"] * 2


class DecodeTiming:
    """Times each decode timing model's builds (the split-KV decode kernel:
    "fused"; the tiled kernels: "tiled") with tfc-run and PyTorch's
    attention on the same f16 inputs, and checks our outputs against
    PyTorch's. One row (a dict) per model."""

    QUEUED = 50  # PyTorch calls queued behind one sleeping kernel

    def __init__(self, base, run, device, seed, work, checks, clock):
        self.base, self.run, self.device = base, run, device
        self.work, self.checks, self.clock = work, checks, clock
        self.gpu = device.type == "cuda"
        props = torch.cuda.get_device_properties(device) if self.gpu else None
        self.l2 = getattr(props, "L2_cache_size", 0) if props else 0
        self.gen = torch.Generator(device=device)
        self.gen.manual_seed(seed + 3)
        self.target_s = 0.3 if self.gpu else 0.1  # timed seconds per number

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
        g = q.shape[1] // k.shape[1]
        k = k.float().repeat_interleave(g, dim=1)
        v = v.float().repeat_interleave(g, dim=1)
        s = q.float() @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        return torch.softmax(s, -1) @ v

    def peer_times(self, qkv, n):
        """n times (ms) of PyTorch's attention. On the GPU: CUDA events
        around each call, the calls queued QUEUED at a time behind a
        sleeping kernel, so that the events time the GPU's work. A decode
        step takes tens of microseconds, about what Python takes to launch
        one: calls launched onto an idle GPU would time the launches."""
        times = []
        if not self.gpu:
            for _ in range(n):
                t = time.perf_counter()
                self.attention(*qkv)
                times.append((time.perf_counter() - t) * 1e3)
            return times
        sleep = getattr(torch.cuda, "_sleep", None)
        while len(times) < n:
            if sleep:
                sleep(SLEEP_CYCLES)
            ev = [(torch.cuda.Event(enable_timing=True),
                   torch.cuda.Event(enable_timing=True))
                  for _ in range(min(self.QUEUED, n - len(times)))]
            for a, b in ev:
                a.record()
                self.attention(*qkv)
                b.record()
            torch.cuda.synchronize()
            times += [a.elapsed_time(b) for a, b in ev]
        return times

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
            np.save(paths[-1], t.cpu().numpy())
        if self.l2 and row["bytes"] <= self.l2:
            row["notes"].append(
                "%s: K and V (%.1f MB) fit in the L2 (%.0f MB) and every "
                "run reads the same ones: its GB/s are partly the L2's" % (
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
        for build in m["builds"]:
            self.build(m, build, paths, expect, row)
        print("time %-30s %s" % (m["name"], ", ".join(
            "%s %.4f ms" % (k[:-3], row[k]) for k in row
            if k.endswith("_ms"))), flush=True)

    def build(self, m, build, paths, expect, row):
        label = "%s %s" % (m["name"], build)
        if not_built(m, build, label, row, self.checks):
            return
        if self.clock.left() < 20:
            row["notes"].append("%s skipped: time budget spent" % label)
            return
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
            return
        row[build + "_ms"], row[build + "_n"] = ms, repeat
        row[build + "_gbps"] = row["bytes"] / ms / 1e6
        if expect is None:
            return
        check_against(out_path, expect, self.device, m["tol"][build],
                      "%s vs %s" % (label, self.peer_name), build, row,
                      self.checks)


def run_decode_timing(manifest, timing, rows):
    """Appends one row per decode timing model to rows and times it."""
    for m in [m for m in manifest["models"]
              if m["group"] == "decode_timing"]:
        row = {"name": m["name"], "B": m["B"], "H": m["H"], "Hkv": m["Hkv"],
               "Skv": m["Skv"], "D": m["D"], "bytes": kv_bytes(m),
               "peer": timing.peer_name, "notes": []}
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
    head += ["fused vs tiled", "fused vs torch", "fused err vs torch",
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
        cells += [ratio("tiled_ms"), ratio("torch_ms"),
                  fmt(r.get("fused_err"), "%.1e")]
        # The decode kernel's builds (all but the tiled kernels).
        timed = [b for b in builds if b != "tiled" and r.get(b + "_ms")]
        best = min(timed, key=lambda b: r[b + "_ms"]) if timed else None
        cells += [best or "—",
                  "%.2fx" % (r["torch_ms"] / r[best + "_ms"])
                  if best and r.get("torch_ms") else "—"]
        lines.append("| " + " | ".join(cells) + " |")
        notes += [n for n in r["notes"] if n not in notes]
    return lines, notes


# ---------------------------------------------------------------- report

def fmt(v, spec="%.3f"):
    return spec % v if v is not None else "—"


# The fused builds the timing compares, in table order (specs.py).
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


def report(header, checks, rows, peer_name, gpu, out, clock, final,
           gemm_rows=(), decode_rows=()):
    failed = checks.failed
    lines = ["# tfc device check", "", header, ""]
    lines.append("**numerics: %d checks, %d passed, %d failed**%s" % (
        len(checks.rows), len(checks.rows) - len(failed), len(failed),
        "" if final else " (incomplete: still running)"))
    for ok, label, detail in failed[:25]:
        lines.append("- FAIL %s: %s" % (label, detail))
    if len(failed) > 25:
        lines.append("- ... %d more FAIL (device-check.md lists every check)"
                     % (len(failed) - 25))
    lines.append("")
    if rows:
        t, notes = timing_table(rows, peer_name)
        lines += ["## Attention timing, f16, B=%s, H=%s" % (
            rows[0]["B"], rows[0]["H"]), ""] + t
        clock_name = "CUDA events" if gpu else "wall clock"
        lines += ["", "tfc: `tfc-run --repeat` median (%s%s, the same inputs "
                  "every run). %s: median of many runs, %s, after warm-up%s. "
                  "TFLOP/s = 4*B*H*S^2*D / t, half that when causal. "
                  "`fused vs X` = t_X / t_fused (above 1x: fused is faster). "
                  "`fused err vs SDPA`: ||tfc - SDPA|| / ||SDPA|| on the "
                  "timing inputs. Triton, where it ran: its tutorial's flash "
                  "attention (128 x 128 tiles, 2 stages, the faster of 4 and "
                  "8 warps), timed as SDPA." % (
                      clock_name, " of the model's kernels" if gpu else "",
                      peer_name, clock_name,
                      ", rotating input sets where one set fits in the L2"
                      if gpu else "")]
        for n in notes:
            lines.append("- " + n)
    if gemm_rows:
        lines += ["", "## GEMM timing, f16 inputs, f32 results", ""]
        lines += gemm_table(gemm_rows)
        lines += ["", "tfc: `tfc-run --repeat` median; torch.matmul: median "
                  "of many runs (%s). TFLOP/s = 2*batch*M*K*N / t. `vs "
                  "torch` = t_torch / t_tfc." % (
                      "CUDA events; its result in f16" if gpu else
                      "wall clock; in f32 on the CPU")]
    if decode_rows:
        t, notes = decode_table(decode_rows)
        lines += ["", "## Decode attention timing, f16, Sq=1, D=%d" %
                  decode_rows[0]["D"], ""] + t
        lines += ["", "fused: the split-KV decode kernel (default); tiled: "
                  "`--gpu-decode-kernel=false`; dmma: the decode kernel on "
                  "tensor cores, `--gpu-decode-mma` (dmma2, dmma3: with "
                  "`--gpu-decode-blocks-per-sm=2` or 3). tfc: `tfc-run "
                  "--repeat` "
                  "median (%s). %s: median of many calls on the same "
                  "inputs (%s). GB/s = K and V bytes read once "
                  "(2*B*Hkv*Skv*D*2) / t; the H200's HBM peak is about "
                  "%d GB/s. `fused vs X` = t_X / t_fused. `fused err vs "
                  "torch`: ||tfc - torch|| / ||torch||." % (
                      "CUDA events from an idle stream: the launches' "
                      "latency, a few microseconds, included"
                      if gpu else "wall clock",
                      decode_rows[0]["peer"],
                      "CUDA events, the calls queued behind a sleeping "
                      "kernel: GPU time only" if gpu else "wall clock",
                      HBM_PEAK_GBPS)]
        for n in notes:
            lines.append("- " + n)
    lines.append("")
    lines.append("wall time of the check: %.0f s" % clock.elapsed())
    md = "\n".join(lines) + "\n"
    if final:
        detail = ["", "## All numerics checks", "", "| | check | detail |",
                  "|---|---|---|"]
        detail += ["| %s | %s | %s |" % ("ok" if ok else "FAIL", label, d)
                   for ok, label, d in checks.rows]
        full = md + "\n".join(detail) + "\n"
    else:
        full = md
    if out:
        with open(os.path.join(out, "device-check.md"), "w") as f:
            f.write(full)
        with open(os.path.join(out, "device-check.json"), "w") as f:
            json.dump({"header": header, "checks": checks.rows,
                       "timing": rows, "gemm_timing": list(gemm_rows),
                       "decode_timing": list(decode_rows)}, f, indent=1)
    return md


def card_header(device, manifest, seed):
    now = datetime.datetime.now(datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M UTC")
    if device.type == "cuda":
        card = torch.cuda.get_device_name(device)
        try:
            driver = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version",
                 "--format=csv,noheader"], capture_output=True, text=True,
                timeout=30).stdout.strip().splitlines()[0]
        except (subprocess.SubprocessError, OSError, IndexError):
            driver = "?"
        cuda = torch.version.cuda
    else:
        card, driver, cuda = "CPU (dry run, no GPU)", "—", "—"
    return ("%s · %s · driver %s · CUDA %s · torch %s · tfc %s (target %s, "
            "%s, built %s) · seed %d" % (
                now, card, driver, cuda, torch.__version__,
                manifest.get("commit", "?"), manifest["target"],
                manifest.get("gpu_arch", "?"), manifest.get("created", "?"),
                seed))


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
    checks, rows, peer, gemm_rows = Checks(), [], Peer(device), []
    decode_rows = []
    try:
        if "numerics" in phases:
            print("== numerics (%s)" % device, flush=True)
            run_numerics(manifest, base, run, device, seed, work, checks,
                         clock)
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
        report(header, checks, rows, peer.name, gpu, a.out, clock, False)
        timing = Timing(base, run, device, seed, work, checks, clock,
                        peer, TritonPeer(device))
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
        if "triton" in phases:
            print("== Triton attention timing (%.0f s left)" % clock.left(),
                  flush=True)
            try:
                run_triton_timing(manifest, timing, rows)
            except Exception as e:  # noqa: BLE001 (a peer's, not ours)
                print("Triton timing stopped: %s: %s" % (type(e).__name__, e),
                      flush=True)
        # Last: a debugging aid that the time left may cut short.
        if gpu and "sanitizer" in phases:
            print("== compute-sanitizer (%.0f s left)" % clock.left(),
                  flush=True)
            run_sanitizer(manifest, base, a.tfc_run, device, seed, work,
                          checks, clock)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        md = report(header, checks, rows, peer.name, gpu, a.out, clock,
                    True, gemm_rows, decode_rows)
        print()
        print(md, end="", flush=True)
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
