"""The device check's report: the numerics checks and the timing tables,
as Markdown (OUT/device-check.md) and every number (device-check.json);
and the header line naming the card, driver, versions and tfc commit."""

import datetime
import json
import os
import subprocess

import torch

import accuracy
import e2e
import generate_timing
from attention_timing import timing_table
from decode_timing import decode_table
from gemm_timing import gemm_table


def report(header, checks, rows, peers, gpu, out, clock, final,
           gemm_rows=(), decode_rows=(), e2e_rows=(), gen_rows=()):
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
        t, notes = timing_table(rows, peers)
        lines += ["## Attention timing, B=%s, H=%s" % (
            rows[0]["B"], rows[0]["H"]), ""] + t
        clock_name = "CUDA events" if gpu else "wall clock"
        lines += ["", "Every row kernel-to-kernel. tfc: `tfc-run --repeat` "
                  "median (%s%s, the same inputs every run). Peers (%s): "
                  "median of many calls, %s%s, after warm-up%s. TFLOP/s = "
                  "4*B*H*S^2*D / t, half that when causal. `X vs P` = t_P / "
                  "t_X (above 1x: X is faster). `fused vs float64`: the "
                  "default build's norm-wise relative error, worst row's "
                  "relative error and largest absolute error on %d query "
                  "rows of each head against float64. Triton, where it ran: "
                  "its tutorial's flash attention (128 x 128 tiles, 2 "
                  "stages, the faster of 4 and 8 warps), timed as the "
                  "peers." % (
                      clock_name, " around the model's kernels" if gpu else
                      "", ", ".join(p.name for p in peers), clock_name,
                      ", queued behind a sleeping kernel (the GPU's time "
                      "only)" if gpu else "",
                      ", rotating input sets where one set fits in the L2"
                      if gpu else "", accuracy.SAMPLE_ROWS)]
        for n in notes:
            lines.append("- " + n)
    if gemm_rows:
        lines += ["", "## GEMM timing, f16 inputs, f32 results", ""]
        lines += gemm_table(gemm_rows)
        lines += ["", "Every row kernel-to-kernel. tfc: `tfc-run --repeat` "
                  "median (CUDA events around the model's kernels, the same "
                  "inputs every run: B stays in the L2 where it fits); "
                  "`(ncu, L2 flushed)`: the default build's kernels alone, "
                  "each replayed by Nsight Compute after flushing the "
                  "caches, median of 3 runs. torch.matmul: median of many "
                  "calls (%s). TFLOP/s = 2*batch*M*K*N / t. `vs torch` = "
                  "t_torch / t_tfc. `default vs float64`: %d rows of A "
                  "against the float64 product." % (
                      "CUDA events, the calls queued behind a sleeping "
                      "kernel, a buffer of twice the L2 written before "
                      "each; its result in f16" if gpu else
                      "wall clock; in f32 on the CPU", accuracy.SAMPLE_ROWS)]
    if decode_rows:
        t, notes = decode_table(decode_rows)
        lines += ["", "## Decode attention timing, f16, Sq=1, D=%d" %
                  decode_rows[0]["D"], ""] + t
        lines += ["", "Every row kernel-to-kernel. fused: the split-KV "
                  "decode kernel (default); tiled: "
                  "`--gpu-decode-kernel=false`; dmma: the decode kernel on "
                  "tensor cores, `--gpu-decode-mma` (dmma2, dmma3: with "
                  "`--gpu-decode-blocks-per-sm=2` or 3). tfc: `tfc-run "
                  "--repeat` median (%s); `(ncu, L2 flushed)`: the default "
                  "build's kernels alone, each replayed by Nsight Compute "
                  "after flushing the caches, median of 3 runs. %s: median "
                  "of many calls on the same inputs (%s). GB/s = K and V "
                  "bytes read once (2*B*Hkv*Skv*D*2) / t; %s (read against "
                  "it: the flushed columns). `fused vs X` = t_X / t_fused. "
                  "`fused err vs torch`: ||tfc - torch|| / ||torch||; "
                  "`fused vs float64`: against attention in float64." % (
                      "CUDA events from an idle stream: the launches' "
                      "latency, a few microseconds, included; the same "
                      "inputs every run" if gpu else "wall clock",
                      decode_rows[0]["peer"],
                      "CUDA events, the calls queued behind a sleeping "
                      "kernel, a buffer of twice the L2 written before each: "
                      "GPU time only, K and V from HBM" if gpu else
                      "wall clock", decode_rows[0]["hbm"])]
        for n in notes:
            lines.append("- " + n)
    if e2e_rows:
        t, notes = e2e.table(e2e_rows)
        lines += ["", "## Whole models against PyTorch", ""] + t
        lines += ["", "tfc: `tfc-run --repeat` median, CUDA events around "
                  "the model's launches from an idle stream (end to end: "
                  "the host's launches included; inputs on the device). "
                  "PyTorch: end to end, CUDA events around each call from an "
                  "idle stream; kernel-to-kernel, the same calls queued "
                  "behind a sleeping kernel. `tfc vs X` = t_X / t_tfc. "
                  "Models: e2e.py's docstring."]
        lines += ["- " + n for n in notes]
    if gen_rows:
        t, notes = generate_timing.table(gen_rows)
        r = gen_rows[0]
        lines += ["", "## Generation against transformers' generate(), "
                  "greedy, %d new tokens after %d" % (r["new"], r["prompt"]),
                  ""] + t
        lines += ["", "End to end, both: wall clock around the whole "
                  "generate() (prefill, every decode step, the search on the "
                  "host), median of timed calls after a warm-up; the "
                  "compile excluded (`compile s`: the first call). tfc: "
                  "tfc.Generator, the KV cache on the device. transformers: "
                  "generate(cache_implementation=\"static\"), its decode "
                  "steps compiled by transformers (`compiled as`). tok/s = "
                  "batch x new tokens / s; `tfc vs transformers` = "
                  "t_transformers / t_tfc, beside issue 47's target. First "
                  "divergence: per row, the first new token where tfc's "
                  "differs from transformers' eager (the check: a near tie "
                  "in its logits there) and compiled generate() (`none`: "
                  "identical). Models: generate_timing.py's docstring."]
        lines += ["- " + n for n in notes]
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
                       "decode_timing": list(decode_rows),
                       "e2e": list(e2e_rows),
                       "generate": list(gen_rows)}, f, indent=1)
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
