"""Time to the first output of a fresh process: loading a LLaMA and its
first prefill, tfc against ONNX Runtime and PyTorch.

Each system runs in a fresh Python process, which imports its library
first (not timed), then times: loading (tfc: `tfc_runtime.Model(lib,
weights)`, and with a packed weights file `load_packed_weights`; ONNX
Runtime: `InferenceSession`, which optimises the graph and prepacks its
weights; PyTorch: `from_pretrained` in eval mode), the first run, and the
median of 5 later runs. Systems: tfc fused f32 and with int4 weights and
int8 activations, each without and with a packed weights file (written
once beforehand by a process of its own); ONNX Runtime f32 and int4
(MatMulNBits, accuracy level 4: int8 activations); PyTorch eager f32.
Every round runs each system once, in turn; the table has medians over
the rounds, and each output's largest difference from PyTorch's.

  bench/.venv/bin/python bench/decoders/cold_start.py [--rounds 5]

Needs bench/decoders/work from `bench/decoders/run.py --family llama
--layers 12 --quantize` (the model, its ONNX exports).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

from run import peer_environments

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
WORK = os.path.join(HERE, "work")
MODEL = os.path.join(WORK, "llama-random-12l")
SEQ = 128
TFC = {"tfc fused f32": [],
       "tfc int4 weights, int8 activations": [
           "--quantize-weights=int4", "--quantize-activations=int8"]}
ORT = {"ONNX Runtime f32": "llama_12l_b1_s128.dynamo.onnx",
       "ONNX Runtime int4, accuracy level 4":
       "llama_12l_b1_s128.dynamo.int4_4.onnx"}


def one(a):
    """Runs in the measured process: prints load, first and later ms."""
    ids = np.load(a.ids)
    mask = np.ones_like(ids)
    if a.kind == "tfc":
        sys.path.insert(0, os.path.join(ROOT, "runtime", "python"))
        import tfc_runtime as tfc
        tfc.set_threads(a.threads)
        t0 = time.perf_counter()
        m = tfc.Model(a.path, weights=os.path.join(MODEL, "model.safetensors"))
        if a.packed:
            m.load_packed_weights(a.packed)

        def call():
            return m.run(ids, mask)[0]
    elif a.kind == "ort":
        import onnxruntime as ort
        o = ort.SessionOptions()
        o.intra_op_num_threads = a.threads
        o.inter_op_num_threads = 1
        o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        t0 = time.perf_counter()
        s = ort.InferenceSession(a.path, o, providers=["CPUExecutionProvider"])

        def call():
            return s.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    else:
        import torch
        import transformers
        torch.set_num_threads(a.threads)
        ti, tm = torch.from_numpy(ids), torch.from_numpy(mask)
        t0 = time.perf_counter()
        m = transformers.LlamaModel.from_pretrained(
            a.path, attn_implementation="eager")
        m.eval()

        def call():
            with torch.inference_mode():
                return m(input_ids=ti, attention_mask=tm)[0].numpy()
    t1 = time.perf_counter()
    first = call()
    t2 = time.perf_counter()
    later = []
    for _ in range(5):
        t = time.perf_counter()
        call()
        later.append((time.perf_counter() - t) * 1e3)
    np.save(a.out, first)
    print(json.dumps({"load": (t1 - t0) * 1e3, "first": (t2 - t1) * 1e3,
                      "later": statistics.median(later)}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--kind")
    ap.add_argument("--path")
    ap.add_argument("--packed")
    ap.add_argument("--ids")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.one:
        return one(a)
    out = os.path.join(WORK, "cold_start")
    os.makedirs(out, exist_ok=True)
    ids = os.path.join(out, "ids.npy")
    np.save(ids, np.random.default_rng(0).integers(
        0, 32000, (1, SEQ)).astype(np.int64))
    mask = os.path.join(out, "mask.npy")
    np.save(mask, np.ones((1, SEQ), np.int64))
    systems = []  # (name, kind, path, packed)
    for name, flags in TFC.items():
        lib = os.path.join(out, name.split()[1] + ".so")
        subprocess.run([os.path.join(a.bin, "tfc-compile"), "--hf", MODEL,
                        "--batch", "1", "--seq-len", str(SEQ), "-o", lib] +
                       flags, check=True, stdout=subprocess.DEVNULL)
        packed = lib[:-3] + ".packed"
        if os.path.exists(packed):
            os.remove(packed)
        subprocess.run([os.path.join(a.bin, "tfc-run"), lib, "--weights",
                        os.path.join(MODEL, "model.safetensors"), "--input",
                        ids, "--input", mask, "--output",
                        os.path.join(out, "o.npy"), "--threads",
                        str(a.threads), "--packed-weights", packed],
                       check=True, stderr=subprocess.DEVNULL)
        systems.append((name, "tfc", lib, None))
        systems.append((name + ", packed weights file", "tfc", lib, packed))
    for name, onnx in ORT.items():
        systems.append((name, "ort", os.path.join(WORK, onnx), None))
    systems.append(("PyTorch eager f32", "torch", MODEL, None))
    env, torch_env = peer_environments()
    results = {s[0]: [] for s in systems}
    outputs = {s[0]: os.path.join(out, "out_%d.npy" % i)
               for i, s in enumerate(systems)}
    for r in range(a.rounds):
        for name, kind, path, packed in systems:
            args = [sys.executable, os.path.abspath(__file__), "--one",
                    "--kind", kind, "--path", path, "--ids", ids,
                    "--threads", str(a.threads),
                    "--out", outputs[name]]
            if packed:
                args += ["--packed", packed]
            p = subprocess.run(args, check=True, capture_output=True,
                               text=True,
                               env=torch_env if kind == "torch" else env)
            results[name].append(json.loads(p.stdout.strip().splitlines()[-1]))
    print("%s, %d rounds, %d threads, prefill of %d tokens" % (
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), a.rounds,
        a.threads, SEQ))
    print("\n| system | load ms | first run ms | load + first run ms | "
          "later runs ms | max abs diff vs PyTorch |")
    print("|---|---:|---:|---:|---:|---:|")
    reference = np.load(outputs["PyTorch eager f32"])
    for name, runs in results.items():
        med = {k: statistics.median(r[k] for r in runs)
               for k in ("load", "first", "later")}
        total = statistics.median(r["load"] + r["first"] for r in runs)
        diff = np.max(np.abs(np.load(outputs[name]) - reference))
        print("| %s | %.0f | %.0f | **%.0f** | %.1f | %.1e |" % (
            name, med["load"], med["first"], total, med["later"], diff))


if __name__ == "__main__":
    main()
