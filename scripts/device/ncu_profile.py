"""Nsight Compute's counters for a few of the device check's builds: each
kernel's time, the DRAM bytes it read and the share of DRAM and SM
throughput and of warp slots it used, for the questions the timings leave
open (where a decode step's time goes: the split-KV kernel or its combine;
how close the GEMV and the attention kernel come to the memory and compute
ceilings). Runs on the device machine, after `prepare` built the models:

  scripts/device-check.sh profile     (device tool: carry [".device"])

The clocks are left as the card has them (--clock-control none); each
kernel is replayed for its counters, so the times are those of one launch
with warm caches, not the check's medians.

usage: profile.py --manifest M --tfc-run T --out DIR [--ncu PATH]
                  [--budget SECONDS]
"""

import argparse
import csv
import io
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

# (model, build): what the H200 runs of 2026-12-04 left open.
TARGETS = [
    ("decode_b1_h32x8_s32768", "fused"),
    ("decode_b1_h32x8_s32768", "dmma2"),
    ("decode_b1_h32x8_s4096", "fused"),
    ("decode_b1_h32x32_s16384", "fused"),
    ("gemm_1x4096x4096_weight", "fused"),
    ("gemm_4096x4096x4096", "fused"),
    ("time_f16_d128_s4096", "fused"),
    ("time_f16_d64_s4096", "fused"),
]
METRICS = [
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "launch__registers_per_thread",
    "launch__grid_size",
]
DTYPES = {"f32": np.float32, "f16": np.float16}


def write_inputs(model, work, rng):
    paths = []
    for t in model["inputs"]:
        if t["dtype"] not in DTYPES:
            raise ValueError("input %s is %s" % (t["name"], t["dtype"]))
        x = rng.standard_normal(t["shape"]).astype(DTYPES[t["dtype"]])
        paths.append(os.path.join(work, t["name"] + ".npy"))
        np.save(paths[-1], x)
    return paths


def parse(stdout):
    """{(launch id, kernel): {metric: value}} from ncu's --csv output."""
    text = stdout[stdout.find('"ID"'):] if '"ID"' in stdout else ""
    rows = {}
    for r in csv.DictReader(io.StringIO(text)):
        key = (r["ID"], r["Kernel Name"])
        value = r["Metric Value"].replace(",", "")
        try:
            rows.setdefault(key, {})[r["Metric Name"]] = float(value)
        except ValueError:
            pass
    return rows


def kernel_ms(ncu, tfc_run, lib, paths, out_path, runs=3):
    """The model's kernels' time per run (ms, the median of `runs`) by
    Nsight Compute: each launch replayed with the caches flushed first
    (--cache-control all) at the card's own clocks; kernel durations only,
    summed per run. (None, why) when it cannot."""
    cmd = [ncu, "--cache-control", "all", "--clock-control", "none",
           "--csv", "--print-units", "base", "--metrics",
           "gpu__time_duration.sum", tfc_run, lib]
    for p in paths:
        cmd += ["--input", p]
    cmd += ["--output", out_path, "--repeat", str(runs), "--warmup", "0"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    except subprocess.TimeoutExpired:
        return None, "ncu timed out"
    launches = sorted(parse(r.stdout).items(),
                      key=lambda kv: int(kv[0][0]))
    if r.returncode or not launches or len(launches) % runs:
        return None, "ncu exit %d, %d launches: %s" % (
            r.returncode, len(launches),
            " ".join((r.stderr or r.stdout).strip().splitlines()[-2:]))
    per = len(launches) // runs
    ns = [sum(v.get("gpu__time_duration.sum", 0) for _, v in
              launches[i * per:(i + 1) * per]) for i in range(runs)]
    return sorted(ns)[runs // 2] / 1e6, None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--manifest", required=True)
    p.add_argument("--tfc-run", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--ncu", default=shutil.which("ncu") or "")
    p.add_argument("--budget", type=float, default=150)
    a = p.parse_args()
    if not a.ncu:
        print("profile: no ncu on this machine")
        return 1
    start = time.monotonic()
    with open(a.manifest) as f:
        manifest = json.load(f)
    base = os.path.dirname(os.path.abspath(a.manifest))
    models = {m["name"]: m for m in manifest["models"]}
    os.makedirs(a.out, exist_ok=True)
    work = os.path.join(a.out, "inputs")
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(0)
    lines = ["| model | build | kernel | grid | registers | us | DRAM read MB "
             "| DRAM GB/s | DRAM % of peak | SM % of peak | warps active % |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    failed = 0
    for name, build in TARGETS:
        left = a.budget - (time.monotonic() - start)
        m = models.get(name)
        if m is None or build not in m.get("paths", {}):
            print("profile: %s %s not in the manifest" % (name, build))
            continue
        if left < 20:
            print("profile: %s %s skipped: budget spent" % (name, build))
            continue
        inputs = write_inputs(m, work, rng)
        cmd = [a.ncu, "--clock-control", "none", "--csv",
               "--print-units", "base", "--metrics",
               ",".join(METRICS), a.tfc_run,
               os.path.join(base, m["paths"][build])]
        for path in inputs:
            cmd += ["--input", path]
        cmd += ["--output", os.path.join(work, "out.npy")]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True,
                               timeout=max(10, left - 10))
        except subprocess.TimeoutExpired:
            print("profile: %s %s: ncu timed out" % (name, build))
            failed += 1
            continue
        with open(os.path.join(a.out, "ncu.csv"), "a") as f:
            f.write("# %s %s\n%s" % (name, build, r.stdout))
        rows = parse(r.stdout)
        if r.returncode or not rows:
            print("profile: %s %s: ncu exit %d: %s" % (
                name, build, r.returncode,
                (r.stderr or r.stdout).strip().splitlines()[-3:]))
            failed += 1
            continue
        for (_, kernel), v in sorted(rows.items(), key=lambda kv:
                                     int(kv[0][0])):
            ns = v.get("gpu__time_duration.sum", 0)
            read = v.get("dram__bytes_read.sum", 0)
            lines.append("| %s | %s | %s | %d | %d | %.1f | %.1f | %.0f | "
                         "%.1f | %.1f | %.1f |" % (
                             name, build, kernel.split("(")[0],
                             v.get("launch__grid_size", 0),
                             v.get("launch__registers_per_thread", 0),
                             ns / 1e3, read / 1e6,
                             read / ns if ns else 0,
                             v.get("dram__throughput.avg.pct_of_peak_"
                                   "sustained_elapsed", 0),
                             v.get("sm__throughput.avg.pct_of_peak_"
                                   "sustained_elapsed", 0),
                             v.get("sm__warps_active.avg.pct_of_peak_"
                                   "sustained_active", 0)))
        print("profile: %s %s: %d launches" % (name, build, len(rows)),
              flush=True)
    shutil.rmtree(work, ignore_errors=True)
    table = "\n".join(lines) + "\n"
    with open(os.path.join(a.out, "profile.md"), "w") as f:
        f.write(table)
    print()
    print(table, end="")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
