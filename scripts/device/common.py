"""What the parts of the device check share: the list of checks, the
budget's clock, tfc-run with a timeout, a timed build's run and checks,
PyTorch's float32 attention by its definition (the CPU's stand-in for
SDPA) and the time of one call."""

import math
import os
import re
import signal
import subprocess
import time

import numpy as np
import torch

from tfc_testing.arrays import bf16_to_f32

# What the GB/s of a decode step (and of a GEMV) are read against: the
# card's HBM bandwidth by its name (H200: HBM3e, about 4.8 TB/s; H100 SXM:
# HBM3, about 3.35 TB/s; H100 PCIe: HBM2e, about 2 TB/s).
HBM_PEAK_GBPS = {"H200": 4800, "H100 PCIe": 2000, "H100": 3350}

# PyTorch's calls are queued behind a kernel that sleeps this many clock
# cycles (about 25 ms at 2 GHz), longer than Python takes to queue
# QUEUED calls.
SLEEP_CYCLES = 50000000
QUEUED = 50


def hbm_peak_gbps(device):
    """(GB/s, card name) of the card's HBM, or (None, name) if unknown."""
    if device.type != "cuda":
        return None, "CPU"
    name = torch.cuda.get_device_name(device)
    for key, gbps in HBM_PEAK_GBPS.items():
        if key in name:
            return gbps, name
    return None, name


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


def median_ms(stdout):
    m = re.search(r"median ([0-9.]+) ms", stdout or "")
    return float(m.group(1)) if m else None


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


def check_against(out_path, expect, device, tol, label, build, row, checks,
                  dtype="f16"):
    """The output at `out_path` (in `dtype`) against the peer's `expect`:
    its relative error on the row (build_err) and a check within `tol`;
    returns the output (float32)."""
    got = load_output(out_path, dtype, device)
    expect = expect.float()
    finite = bool(torch.isfinite(got).all())
    e = float(torch.linalg.norm(got - expect) / torch.linalg.norm(expect))
    row[build + "_err"] = e
    checks.add(finite and e <= tol, label, "rel.err %.2e (tol %.1e)%s" % (
        e, tol, "" if finite else ", NON-FINITE values"))
    return got


def math_attention(q, k, v, causal=False):
    """Attention in float32 by its definition (PyTorch 1.13 has no SDPA):
    grouped-query heads by repeating K and V, causal with Sq = Skv."""
    g = q.shape[1] // k.shape[1]
    k = k.float().repeat_interleave(g, dim=1)
    v = v.float().repeat_interleave(g, dim=1)
    s = q.float() @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1),
                          -math.inf)
    return torch.softmax(s, -1) @ v


def once_ms(call, gpu):
    """The ms of one call(): CUDA events around it on a GPU, a wall clock
    otherwise."""
    if not gpu:
        t = time.perf_counter()
        call()
        return (time.perf_counter() - t) * 1e3
    a = torch.cuda.Event(enable_timing=True)
    b = torch.cuda.Event(enable_timing=True)
    a.record()
    call()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b)


def queued_times(call, n, gpu, between=None, queued=QUEUED):
    """n times (ms) of call(). On the GPU: CUDA events around each call,
    the calls queued `queued` at a time behind a sleeping kernel
    (torch.cuda._sleep), so that the events time the GPU's work only, not
    Python's launches; `between` (an L2 flush, say) runs before each call,
    outside its events. On the CPU: a wall clock."""
    times = []
    if not gpu:
        for _ in range(n):
            if between:
                between()
            times.append(once_ms(call, False))
        return times
    sleep = getattr(torch.cuda, "_sleep", None)
    while len(times) < n:
        if sleep:
            sleep(SLEEP_CYCLES)
        ev = [(torch.cuda.Event(enable_timing=True),
               torch.cuda.Event(enable_timing=True))
              for _ in range(min(queued, n - len(times)))]
        for a, b in ev:
            if between:
                between()
            a.record()
            call()
            b.record()
        torch.cuda.synchronize()
        times += [a.elapsed_time(b) for a, b in ev]
    return times


class L2Flush:
    """Writes a buffer of twice the L2's size (what flush() does), so that
    what the next call reads comes from HBM."""

    def __init__(self, device, l2_bytes):
        self.buffer = (torch.empty(max(1, 2 * l2_bytes // 4),
                                   dtype=torch.float32, device=device)
                       if l2_bytes else None)

    def __call__(self):
        if self.buffer is not None:
            self.buffer.fill_(1.0)


def save_tensor(t, path):
    """`t` as tfc-run reads it (bf16 as '<u2' bits)."""
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        np.save(path, t.view(torch.int16).numpy().view(np.uint16))
    else:
        np.save(path, t.numpy())


def load_output(path, dtype, device):
    """What tfc-run wrote at `path` (bf16 as '<u2' bits) as float32 on
    `device`."""
    a = np.load(path)
    if dtype == "bf16":
        a = bf16_to_f32(a)
    return torch.from_numpy(np.asarray(a, dtype=np.float32)).to(device)


def fmt(v, spec="%.3f"):
    return spec % v if v is not None else "—"


# The fused builds the timing compares, in table order (specs.py).
