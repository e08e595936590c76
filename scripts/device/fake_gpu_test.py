"""The dry run's test of check.py's GPU-only branches, on the CPU.

Without a GPU, check.py takes its CPU branches; this runs the others
(CUDA-event timing, forced-flash SDPA, input sets rotated past the L2, the
device header; the decode timing's SDPA with enable_gqa, queued behind
torch.cuda._sleep; Triton's attention launched with host tensor
descriptors) with stand-ins for torch.cuda.Event, torch.cuda._sleep,
sdpa_kernel, scaled_dot_product_attention and Triton (a module whose
kernel checks its grid, descriptors and arguments and computes attention),
on the dry run's first timing models and its decode timing models; and
the generation's (f16, transformers' own compile settings: a stand-in
torch.compile records them) on the dry run's generation builds, with its
errors and its near-tie test. It catches Python mistakes in
code that would otherwise first run on the device, where a crash costs
lease time; it says nothing about the real APIs' behaviour beyond their
names and signatures.

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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "pylib"))
import attention_timing  # noqa: E402
import decode_timing  # noqa: E402
import generate_timing  # noqa: E402
from common import Checks, Clock, TfcRun, math_attention  # noqa: E402
from numerics import run_sanitizer  # noqa: E402
from report import card_header, report  # noqa: E402


class FakeEvent:
    def __init__(self, enable_timing=False):
        assert enable_timing
        self.t = None

    def record(self, stream=None):
        self.t = time.perf_counter()

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3


gqa_calls = []
sleeps = []


def fake_sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False,
              scale=None, enable_gqa=False):
    if k.shape[1] != q.shape[1]:
        if not enable_gqa:  # as the real one
            raise RuntimeError("query and key heads differ: enable_gqa")
        gqa_calls.append(q.shape)
    return math_attention(q, k, v, is_causal).to(q.dtype)


backends_entered = []
triton_launches = []
fa3_calls = []


def fake_fa3(q, k, v, causal=False):
    """flash_attn_interface.flash_attn_func's stand-in: [B, S, H, D] in,
    (out [B, S, H, D], lse) back."""
    fa3_calls.append(q.shape)
    o = fake_sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                  is_causal=causal).transpose(1, 2)
    return o, None


class FakeDescriptor:
    """triton.tools.tensor_descriptor.TensorDescriptor.from_tensor's
    stand-in: keeps the tensor (a view of the caller's) and block shape."""

    def __init__(self, tensor, block_shape):
        assert tensor.is_contiguous() and tensor.dim() == len(block_shape)
        self.base, self.block_shape = tensor, list(block_shape)


FakeDescriptor.from_tensor = FakeDescriptor  # from_tensor(t, block_shape)


class FakeTritonKernel:
    """generate.attention_tutorial's stand-in: kernel[grid](q, k, v, o
    descriptors of [B*H, S, D], S, scale, CAUSAL=, BM=, BN=, D=, WS=,
    num_warps=, num_stages=) checks what the tutorial's kernel needs and
    writes attention into o's tensor."""

    def __getitem__(self, grid):
        def launch(q, k, v, o, s, scale, CAUSAL, BM, BN, D, WS, num_warps,
                   num_stages):
            bh = q.base.shape[0]
            assert grid == (s // BM, bh, 1) and s % BM == 0, grid
            for d in (q, k, v, o):
                assert d.base.shape == (bh, s, D), d.base.shape
                assert d.block_shape == [1, BM, D], d.block_shape
            assert abs(scale - 1 / math.sqrt(D)) < 1e-12 and not WS
            assert BN == BM and num_warps in (4, 8) and num_stages == 2
            triton_launches.append((bh, s, D, CAUSAL))
            o.base.copy_(fake_sdpa(q.base[None], k.base[None], v.base[None],
                                   is_causal=CAUSAL)[0])
        return launch


def fake_triton_modules():
    """sys.modules entries for triton, triton.tools.tensor_descriptor and
    generate (TritonPeer's imports)."""
    triton = types.ModuleType("triton")
    triton.__version__ = "fake"
    tools = types.ModuleType("triton.tools")
    td = types.ModuleType("triton.tools.tensor_descriptor")
    td.TensorDescriptor = FakeDescriptor
    generate = types.ModuleType("generate")
    generate.attention_tutorial = FakeTritonKernel()
    return {"triton": triton, "triton.tools": tools,
            "triton.tools.tensor_descriptor": td, "generate": generate}


# Nsight Compute's stand-in: runs the command after its options, then
# prints, as `ncu --csv` does, two kernel launches per run of --repeat N.
FAKE_NCU_NS = 1234
FAKE_NCU = """import subprocess, sys
args = sys.argv[1:]
while args[0].startswith("--"):
    args = args[2:] if args[0] != "--csv" else args[1:]
subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
runs = int(args[args.index("--repeat") + 1])
print('"ID","Process ID","Kernel Name","Metric Name","Metric Unit",'
      '"Metric Value"')
for i in range(2 * runs):
    print('"%d","1","k%d(float*)","gpu__time_duration.sum","ns","1,234"'
          % (i, i % 2))
"""


def write_fake_ncu(work):
    path = os.path.join(work, "fake-ncu")
    with open(path, "w") as f:
        f.write("#!%s\n%s" % (sys.executable, FAKE_NCU))
    os.chmod(path, 0o755)
    return path


@contextlib.contextmanager
def fake_sdpa_kernel(backends):
    backends_entered.append(backends)
    yield


def fake_generation(manifest, manifest_path, work):
    """The generation's GPU branches (f16, the GPU's queue drained around
    each generate(), transformers' own compile settings) on the CPU:
    transformers' compile criteria met there, torch.compile a stand-in
    that records its options and returns the function. Then divergence()
    on made-up logits: a near tie passes, a clear miss does not. (rows,
    whether all held)."""
    import numpy as np
    from transformers.generation.utils import GenerationMixin
    compiles = []

    def fake_compile(fn, **options):
        compiles.append(options)
        return fn
    saved = torch.compile, GenerationMixin._valid_auto_compile_criteria
    torch.compile = fake_compile
    GenerationMixin._valid_auto_compile_criteria = (
        lambda self, kw, gc: not gc.disable_compile)
    rows, checks = [], Checks()
    try:
        generate_timing.check(os.path.dirname(os.path.abspath(
            manifest_path)), manifest, torch.device("cpu"), work, checks,
            Clock(300), rows, 1, gpu=True)
    finally:
        torch.compile, GenerationMixin._valid_auto_compile_criteria = saved
    # The errors: a build the spec lacks, a generation that did not build.
    base = os.path.dirname(os.path.abspath(manifest_path))
    with open(os.path.join(base, generate_timing.DIR, "spec.json")) as f:
        spec = json.load(f)
    model_dir = os.path.join(work, "generate-errors")
    os.makedirs(model_dir)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(spec["cfg"], f)
    import tfc
    try:
        generate_timing.generators()[1](base, [], model_dir, 9, batch=2,
                                        dtype="f16", device="cpu")
        missing = "no error"
    except tfc.Error as e:
        missing = str(e)
    not_built = Checks()
    print("generation errors (the FAIL line is expected):")
    generate_timing.check(model_dir, {"target": "cpu", "generate": {
        generate_timing.NAME: "tfc-compile: error: bad"}},
        torch.device("cpu"), work, not_built, Clock(10), [], 1)
    errors_ok = (missing.startswith("no prepared build of batch 2, length "
                                    "1, --past-len=8") and
                 [r[2] for r in not_built.rows] ==
                 ["not built: tfc-compile: error: bad"])
    print("generation errors: %s (%s; %s)" % (
        "ok" if errors_ok else "FAIL", missing, not_built.rows))
    logits = np.array([[0.0, 1.0, 3.0], [0.0, 2.99, 3.0]])
    want = np.array([9, 2, 2])
    tie = generate_timing.divergence(np.array([9, 2, 1]), want, logits, 1)
    miss = generate_timing.divergence(np.array([9, 1, 2]), want, logits, 1)
    same = generate_timing.divergence(want, want, logits, 1)
    ok = (errors_ok and len(rows) == len(generate_timing.SMALL[2]) and
          not checks.failed and
          all(r.get("tfc_s") and r.get("peer_s") and
              r.get("compiled_as") == "inductor reduce-overhead"
              for r in rows) and
          compiles and all(c.get("backend") == "inductor" and
                           c.get("mode") == "reduce-overhead"
                           for c in compiles) and
          tie[0] == 1 and tie[1] <= generate_timing.TIE_TOL and
          miss[0] == 0 and miss[1] > generate_timing.TIE_TOL and
          same == (None, 0.0))
    print("generation stand-ins: %s (%d rows, torch.compile %s; divergence "
          "near tie %s, miss %s)" % ("ok" if ok else "FAIL", len(rows),
                                     compiles[:1], tie, miss))
    return rows, bool(ok)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--manifest", required=True)
    p.add_argument("--tfc-run", required=True)
    a = p.parse_args()

    torch.cuda.Event = FakeEvent
    torch.cuda.synchronize = lambda device=None: None
    torch.cuda._sleep = sleeps.append
    torch.cuda.get_device_name = lambda device=None: "Fake H200"
    F.scaled_dot_product_attention = fake_sdpa
    attention_timing.sdpa_kernel = fake_sdpa_kernel
    attention_timing.SDPBackend = types.SimpleNamespace(
        FLASH_ATTENTION="FLASH", CUDNN_ATTENTION="CUDNN")

    with open(a.manifest) as f:
        manifest = json.load(f)
    cpu = torch.device("cpu")
    header = card_header(types.SimpleNamespace(type="cuda"), manifest, 1)
    assert "Fake H200" in header, header

    # The peers: SDPA's cuDNN and flash backends, FA3 through a stand-in
    # flash_attn_interface ([B, S, H, D] views; (out, lse) back); without
    # it and without PyTorch's FA3 impl, FA3 is "not available".
    gpu_device = types.SimpleNamespace(type="cuda")
    saved_fa3 = sys.modules.get("flash_attn_interface")
    sys.modules["flash_attn_interface"] = None  # import fails
    import torch.nn.attention as nn_attention
    listed = getattr(nn_attention, "list_flash_attention_impls", None)
    nn_attention.list_flash_attention_impls = lambda: ["FA4"]
    missing = attention_timing.Peer(gpu_device, "fa3")
    if listed is None:
        del nn_attention.list_flash_attention_impls
    else:
        nn_attention.list_flash_attention_impls = listed
    sys.modules["flash_attn_interface"] = types.SimpleNamespace(
        flash_attn_func=fake_fa3)
    peers = [attention_timing.Peer(gpu_device, k)
             for k in attention_timing.PEERS]
    if saved_fa3 is None:
        del sys.modules["flash_attn_interface"]
    else:
        sys.modules["flash_attn_interface"] = saved_fa3
    peers_ok = (missing.error and "not available" in missing.error and
                all(p.error is None for p in peers))
    print("peers: %s; FA3 without its module: %s" % (
        ", ".join(p.name for p in peers), missing.error))
    checks = Checks()
    work = tempfile.mkdtemp(prefix="tfc-fake-gpu-")
    timing = attention_timing.Timing(
        os.path.dirname(os.path.abspath(a.manifest)),
        TfcRun(a.tfc_run, ["--threads", "1"]), cpu, 1, work, checks,
        Clock(120), peers)
    timing.gpu, timing.l2, timing.target_s = True, 4 << 20, 0.05
    models = [m for m in manifest["models"] if m["group"] == "timing"][:2]
    rows = []
    attention_timing.run_timing({"models": models}, timing, rows)
    # Triton's attention on the same models, after the other timings.
    saved = {n: sys.modules.get(n) for n in fake_triton_modules()}
    sys.modules.update(fake_triton_modules())
    timing.triton = attention_timing.TritonPeer(
        types.SimpleNamespace(type="cuda"))
    for name, module in saved.items():
        if module is None:
            del sys.modules[name]
        else:
            sys.modules[name] = module
    assert timing.triton.error is None, timing.triton.error
    attention_timing.run_late_timing({"models": models}, timing, rows)
    lines, _ = attention_timing.timing_table(rows, peers)
    print("\n".join(lines))
    attention_head = lines[0]
    triton_ok = (all(r.get("triton_ms") and r.get("triton_err") is not None
                     and r["triton_err"] < 1e-3 and
                     r.get("triton_warps") in (4, 8) for r in rows) and
                 len(triton_launches) > len(rows) and
                 "fastest tfc vs Triton" in lines[0])
    print("Triton stand-in: %s (%d launches)" % (
        "ok" if triton_ok else "FAIL", len(triton_launches)))

    # Decode timing: SDPA with enable_gqa, queued behind a sleep (the
    # stand-in only counts them), K and V within the stand-in L2.
    decode = decode_timing.DecodeTiming(
        os.path.dirname(os.path.abspath(a.manifest)),
        TfcRun(a.tfc_run, ["--threads", "1"]), cpu, 1, work, checks,
        Clock(120))
    decode.gpu, decode.l2, decode.target_s = True, 4 << 20, 0.05
    decode.QUEUED = 4  # several queues of calls, each behind a sleep
    decode.ncu = write_fake_ncu(work)
    # The CPU models have no "tiled" build: the fused one stands in for it,
    # for the table's tiled columns and ratio.
    decode_models = [dict(m, builds=m["builds"] + ["tiled"],
                          paths=dict(m["paths"], tiled=m["paths"]["fused"]))
                     for m in manifest["models"]
                     if m["group"] == "decode_timing"]
    decode_rows = []
    decode_timing.run_decode_timing({"models": decode_models}, decode,
                                    decode_rows)
    lines, _ = decode_timing.decode_table(decode_rows)
    print("\n".join(lines))
    gen_rows, gen_ok = fake_generation(manifest, a.manifest, work)
    text = report(header, checks, rows, peers, True, work, Clock(1),
                  True, decode_rows=decode_rows, gen_rows=gen_rows)
    gen_ok = gen_ok and "## Generation against transformers'" in text
    with open(os.path.join(work, "device-check.json")) as f:
        decode_json = json.load(f)["decode_timing"]

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
        sanitized[name] = Checks()
        run_sanitizer(manifest, os.path.dirname(os.path.abspath(a.manifest)),
                      a.tfc_run, 1, work, sanitized[name], Clock(600))
    os.environ["PATH"] = path_before
    sanitizer_ok = (not sanitized["clean"].failed and
                    sanitized["error"].failed)
    print("sanitizer stand-ins: clean %s, reporting %s" % (
        "passes" if not sanitized["clean"].failed else "FAILS",
        "fails" if sanitized["error"].failed else "PASSES"))
    shutil.rmtree(work, ignore_errors=True)
    decode_ok = (decode_rows and gqa_calls and len(sleeps) > 1 and
                 all(r.get("fused_ms") and r.get("tiled_ms") and
                     r.get("torch_ms") and r.get("tiled_err") is not None
                     and r.get("fused_f64") and r.get("fused_ncu_ms") ==
                     FAKE_NCU_NS * 2 / 1e6 for r in decode_rows) and
                 any("fit in the L2" in n for r in decode_rows
                     for n in r["notes"]) and
                 "queued behind a sleeping kernel" in text and
                 len(decode_json) == len(decode_rows))
    print("decode timing stand-ins: %s (%d SDPA calls with grouped heads, "
          "%d sleeps)" % ("ok" if decode_ok else "FAIL", len(gqa_calls),
                          len(sleeps)))
    ok = (sanitizer_ok and decode_ok and triton_ok and gen_ok and
          not checks.failed and
          backends_entered and
          peers_ok and fa3_calls and
          all(r.get("fused_ms") and r.get("fused_f64") and
              all(r.get("peer_%s_ms" % p.kind) for p in peers)
              for r in rows) and
          all("vs " + p.name in attention_head for p in peers) and
          rows[0]["sets"] > 1 and "CUDA events" in text)
    print("%d passed, %d failed" % (int(bool(ok)), int(not ok)))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
