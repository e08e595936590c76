"""The device check's report: the numerics checks and the timing tables,
as Markdown (OUT/device-check.md) and every number (device-check.json);
and the header line naming the card, driver, versions and tfc commit."""

import datetime
import json
import os
import subprocess

import torch

from attention_timing import timing_table
from common import HBM_PEAK_GBPS
from decode_timing import decode_table
from gemm_timing import gemm_table


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
