"""The dry run's test of check.py's GPU-only branches, on the CPU.

Without a GPU, check.py takes its CPU branches; this runs the others
(CUDA-event timing, forced-flash SDPA, input sets rotated past the L2, the
device header) with stand-ins for torch.cuda.Event, sdpa_kernel and
scaled_dot_product_attention, on the dry run's first timing models. It
catches Python mistakes in code that would otherwise first run on the
device, where a crash costs lease time; it says nothing about the real
APIs' behaviour beyond their names and signatures.

usage: fake_gpu_test.py --manifest M --tfc-run PATH
"""

import argparse
import contextlib
import json
import math
import os
import shutil
import sys
import tempfile
import time
import types

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check  # noqa: E402


class FakeEvent:
    def __init__(self, enable_timing=False):
        assert enable_timing
        self.t = None

    def record(self, stream=None):
        self.t = time.perf_counter()

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3


def fake_sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False,
              scale=None):
    s = q.float() @ k.float().transpose(-1, -2) / math.sqrt(q.shape[-1])
    if is_causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1),
                          -math.inf)
    return (torch.softmax(s, -1) @ v.float()).to(q.dtype)


backends_entered = []


@contextlib.contextmanager
def fake_sdpa_kernel(backends):
    backends_entered.append(backends)
    yield


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--manifest", required=True)
    p.add_argument("--tfc-run", required=True)
    a = p.parse_args()

    torch.cuda.Event = FakeEvent
    torch.cuda.synchronize = lambda device=None: None
    torch.cuda.get_device_name = lambda device=None: "Fake H200"
    F.scaled_dot_product_attention = fake_sdpa
    check.F = F
    check.sdpa_kernel = fake_sdpa_kernel
    check.SDPBackend = types.SimpleNamespace(FLASH_ATTENTION="FLASH")

    with open(a.manifest) as f:
        manifest = json.load(f)
    cpu = torch.device("cpu")
    header = check.card_header(types.SimpleNamespace(type="cuda"), manifest,
                               1)
    assert "Fake H200" in header, header

    peer = check.Peer(cpu)
    peer.gpu, peer.name = True, "SDPA flash"
    checks = check.Checks()
    work = tempfile.mkdtemp(prefix="tfc-fake-gpu-")
    timing = check.Timing(os.path.dirname(os.path.abspath(a.manifest)),
                          check.TfcRun(a.tfc_run, ["--threads", "1"]), cpu,
                          1, work, checks, check.Clock(120), peer)
    timing.gpu, timing.l2, timing.target_s = True, 4 << 20, 0.05
    models = [m for m in manifest["models"] if m["group"] == "timing"][:2]
    rows = []
    check.run_timing({"models": models}, timing, rows)
    lines, _ = check.timing_table(rows, peer.name)
    print("\n".join(lines))
    report = check.report(header, checks, rows, peer.name, True, work,
                          check.Clock(1), True)

    # compute-sanitizer: a stand-in that drops the tool's options and runs
    # the model, and one that reports an error; the second must fail.
    fake_bin = os.path.join(work, "sanitizer-bin")
    os.makedirs(fake_bin)
    path_before = os.environ["PATH"]
    sanitized = {}
    print("sanitizer stand-ins (the FAIL lines of the reporting one are "
          "expected):")
    for name, status in (("clean", "exec \"$@\""), ("error", "exit 99")):
        tool = os.path.join(fake_bin, "compute-sanitizer")
        with open(tool, "w") as f:
            f.write("#!/bin/sh\nwhile [ \"${1#--}\" != \"$1\" ]; do "
                    "shift 2; done\n%s\n" % status)
        os.chmod(tool, 0o755)
        os.environ["PATH"] = fake_bin + os.pathsep + path_before
        sanitized[name] = check.Checks()
        check.run_sanitizer(manifest, os.path.dirname(os.path.abspath(
            a.manifest)), a.tfc_run, cpu, 1, work, sanitized[name],
            check.Clock(600))
    os.environ["PATH"] = path_before
    sanitizer_ok = (not sanitized["clean"].failed and
                    sanitized["error"].failed)
    print("sanitizer stand-ins: clean %s, reporting %s" % (
        "passes" if not sanitized["clean"].failed else "FAILS",
        "fails" if sanitized["error"].failed else "PASSES"))
    shutil.rmtree(work, ignore_errors=True)
    ok = (sanitizer_ok and not checks.failed and backends_entered and
          all(r.get("fused_ms") and r.get("peer_ms") for r in rows) and
          rows[0]["sets"] > 1 and "CUDA events" in report)
    print("%d passed, %d failed" % (int(bool(ok)), int(not ok)))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
