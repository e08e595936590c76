"""all-MiniLM-L6-v2 end to end in the device check.

The model's 90 MB of f32 weights cannot travel (64 MiB per call), so prepare
carries them rounded to f16 (45 MB); the run widens them back to f32, runs
the tfc build on the fixture sentences (tests/fixtures/minilm: batch 8,
sequence 128) and compares its sentence embeddings with PyTorch's BertModel
(mean pooling, L2 normalisation, as sentence-transformers computes them) run
in float64 on the same rounded weights: cosine above 0.9999 per sentence and
max abs error under 1e-4, as the CPU test requires. The distance to the
fixture's embeddings (original weights) is printed for information.

The same model computing in f16 (tfc-compile --dtype=f16: the weights cast
to f16 in the model, which gives back the carried f16 values) is checked against that reference within 10
units of f16's roundoff (norm-wise, 2^-11 each; cosine above 0.999, as
tests/Integration/CPU/minilm.py requires) and timed beside the f32 build;
on a GPU, PyTorch's BertModel in f16 (.half(), the same weights, pooling
and normalisation in f32) is timed on the same batch with CUDA events.
"""

import os
import re
import shutil
import subprocess

import numpy as np

from tfc_testing import safetensors_file

BATCH, SEQ = 8, 128
DIR = "minilm"
LIB = os.path.join("models", "minilm.fused.so")
LIB16 = os.path.join("models", "minilm.f16.so")
F16_TOL = 10 * 2.0**-11


def compile_hf(tfc_compile, model_dir, batch, seq, lib, target, gpu_flags):
    """tfc-compile --hf of the fused build into `lib` (gpu_flags: extra
    tfc-compile flags, --gpu-arch and the like); returns an error line or
    None."""
    cmd = [tfc_compile, "--hf", model_dir, "--batch", str(batch),
           "--seq-len", str(seq), "-o", lib, "--target=" + target]
    cmd += gpu_flags
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode:
        lines = r.stderr.strip().splitlines()
        return "tfc-compile: " + (lines[-1] if lines else "exit %d" %
                                  r.returncode)
    return None


def prepare(model_dir, fixtures, tfc_compile, out, target, gpu_flags):
    """Compiles the fused build and writes DIR/minilm; returns an error line
    or None."""
    for lib, flags in ((LIB, []), (LIB16, ["--dtype=f16"])):
        err = compile_hf(tfc_compile, model_dir, BATCH, SEQ,
                         os.path.join(out, lib), target, gpu_flags + flags)
        if err:
            return err
    dst = os.path.join(out, DIR)
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    weights = safetensors_file.read(os.path.join(model_dir,
                                                 "model.safetensors"))
    safetensors_file.write_arrays(os.path.join(dst, "model.f16.safetensors"),
                      {k: v.astype(np.float16) if v.dtype == np.float32 else v
                       for k, v in weights.items()})
    shutil.copy(os.path.join(model_dir, "config.json"), dst)
    for name in ("input_ids.npy", "attention_mask.npy", "embeddings.npy"):
        shutil.copy(os.path.join(fixtures, name), dst)
    return None


def reference(config_path, weights, ids, mask, device):
    """Sentence embeddings by PyTorch's BertModel in float64."""
    import torch
    from transformers import BertConfig, BertModel
    model = BertModel(BertConfig.from_json_file(config_path),
                      add_pooling_layer=False)
    state = {k: torch.from_numpy(np.array(v)) for k, v in weights.items()}
    missing, _ = model.load_state_dict(state, strict=False)
    if missing:
        raise RuntimeError("weights lack %s" % ", ".join(missing[:3]))
    model = model.double().to(device).eval()
    ids_t = torch.from_numpy(ids).to(device)
    mask_t = torch.from_numpy(mask).to(device)
    with torch.no_grad():
        tokens = model(input_ids=ids_t, attention_mask=mask_t)[0]
    m = mask_t.unsqueeze(-1).double()
    pooled = (tokens * m).sum(1) / m.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=1).cpu().numpy()


def check(base, run, device, work, checks, clock):
    src = os.path.join(base, DIR)
    if not os.path.isdir(src):
        print("info minilm: not prepared (model not installed there)",
              flush=True)
        return
    label = "minilm batch %d seq %d fused" % (BATCH, SEQ)
    f32 = widened_weights(src, work)
    weights = safetensors_file.read(f32)
    ids = np.load(os.path.join(src, "input_ids.npy"))
    mask = np.load(os.path.join(src, "attention_mask.npy"))
    out = os.path.join(work, "minilm_out.npy")
    stdout, err = run(os.path.join(base, LIB),
                      [os.path.join(src, "input_ids.npy"),
                       os.path.join(src, "attention_mask.npy")], out,
                      timeout=min(120, clock.left() - 5), repeat=10, warmup=2,
                      weights=f32)
    if err:
        checks.add(False, label, err)
        return
    emb = np.load(out).astype(np.float64)
    ref = reference(os.path.join(src, "config.json"), weights, ids, mask,
                    device)
    cos = (emb * ref).sum(1) / (np.linalg.norm(emb, axis=1) *
                                np.linalg.norm(ref, axis=1))
    err_abs = float(np.abs(emb - ref).max())
    ok = bool(np.all(np.isfinite(emb))) and cos.min() > 0.9999 and \
        err_abs < 1e-4
    checks.add(ok, label, "min cosine %.8f (> 0.9999), max abs error %.1e "
               "(< 1e-4) against float64 PyTorch on the same weights" %
               (cos.min(), err_abs))
    fixture = np.load(os.path.join(src, "embeddings.npy")).astype(np.float64)
    cos_f = (emb * fixture).sum(1) / (np.linalg.norm(emb, axis=1) *
                                      np.linalg.norm(fixture, axis=1))
    m = re.search(r"median ([0-9.]+) ms", stdout or "")
    print("info minilm: min cosine %.6f to the f32-weights fixture (weights "
          "rounded to f16 for the trip); tfc %s ms per batch" %
          (cos_f.min(), m.group(1) if m else "?"), flush=True)
    check_f16(base, run, device, work, checks, clock, src, f32, ref,
              m.group(1) if m else "?")


def check_f16(base, run, device, work, checks, clock, src, weights, ref,
              ms32):
    """The --dtype=f16 build against `ref`, and its time beside the f32
    build's (`ms32`) and PyTorch's in f16. `weights`: the widened f32 file
    (the model was imported from f32 weights and casts them to f16 once
    per run: the f16 values carried)."""
    label = "minilm batch %d seq %d f16 (--dtype=f16)" % (BATCH, SEQ)
    if not os.path.exists(os.path.join(base, LIB16)):
        checks.add(False, label, "not built")
        return
    out = os.path.join(work, "minilm16_out.npy")
    # (The CPU of the dry run has no f16 GEMM: one run there, seconds.)
    gpu = device.type == "cuda"
    stdout, err = run(os.path.join(base, LIB16),
                      [os.path.join(src, "input_ids.npy"),
                       os.path.join(src, "attention_mask.npy")], out,
                      timeout=min(120, clock.left() - 5),
                      repeat=10 if gpu else 1, warmup=2 if gpu else 0,
                      weights=weights)
    if err:
        checks.add(False, label, err)
        return
    emb = np.load(out).astype(np.float64)
    cos = (emb * ref).sum(1) / (np.linalg.norm(emb, axis=1) *
                                np.linalg.norm(ref, axis=1))
    rel = float(np.linalg.norm(emb - ref) / np.linalg.norm(ref))
    ok = bool(np.all(np.isfinite(emb))) and cos.min() > 0.999 and \
        rel <= F16_TOL
    checks.add(ok, label, "min cosine %.6f (> 0.999), rel.err %.2e (tol "
               "%.1e) against float64 PyTorch on the same weights" %
               (cos.min(), rel, F16_TOL))
    m = re.search(r"median ([0-9.]+) ms", stdout or "")
    peer = "- (no GPU)"
    if gpu:  # a peer that fails is information, not a failed check
        try:
            peer = "%.3f" % torch_f16_ms(src, device)
        except Exception as e:
            peer = "- (failed: %s: %s)" % (type(e).__name__,
                                           str(e).splitlines()[0][:120])
    print("info minilm: tfc f16 %s ms, tfc f32 %s ms, PyTorch f16 %s ms per "
          "batch" % (m.group(1) if m else "?", ms32, peer), flush=True)


def widened_weights(src, work):
    """The carried f16 weights widened to f32 (the file the builds were
    imported from): work/minilm.f32.safetensors, written once."""
    path = os.path.join(work, "minilm.f32.safetensors")
    if not os.path.exists(path):
        safetensors_file.write_arrays(path, {
            k: v.astype(np.float32) if v.dtype == np.float16 else v
            for k, v in safetensors_file.read(
                os.path.join(src, "model.f16.safetensors")).items()})
    return path


def torch_model(src, device, half=True):
    """A call of PyTorch's BertModel (f16 with `half`, else f32) with mean
    pooling and L2 normalisation in f32, on the fixture batch: the
    sentence embeddings."""
    import torch
    from transformers import BertConfig, BertModel
    model = BertModel(BertConfig.from_json_file(
        os.path.join(src, "config.json")), add_pooling_layer=False)
    weights = safetensors_file.read(os.path.join(src,
                                                 "model.f16.safetensors"))
    model.load_state_dict({k: torch.from_numpy(np.array(v))
                           for k, v in weights.items()}, strict=False)
    model = (model.half() if half else model.float()).to(device).eval()
    ids = torch.from_numpy(np.load(os.path.join(src, "input_ids.npy"))).to(
        device)
    mask = torch.from_numpy(np.load(os.path.join(
        src, "attention_mask.npy"))).to(device)

    def once():
        tokens = model(input_ids=ids, attention_mask=mask)[0].float()
        m = mask.unsqueeze(-1).float()
        pooled = (tokens * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, dim=1)
    return once


def torch_f16_ms(src, device, runs=30):
    """Median ms of PyTorch's BertModel in f16 (.half()) with mean pooling
    and L2 normalisation, on the fixture batch, by CUDA events."""
    import torch

    from common import once_ms
    once = torch_model(src, device)
    with torch.no_grad():
        for _ in range(3):
            once()
        times = sorted(once_ms(once, True) for _ in range(runs))
    return times[len(times) // 2]
