"""all-MiniLM-L6-v2 compiled from its ONNX export and from its Hugging Face
directory: the same last hidden state on the same inputs, the same fusion.

  check.py GRAPH.onnx MODEL_DIR --bin DIR --work DIR --batch B --seq-len S

Writes GRAPH's external data from MODEL_DIR (write_data.py), compiles the
ONNX file and `--hf MODEL_DIR --output hidden` at B x S, runs both on the
same random ids (in [0, vocab)) and attention mask (a padded tail in every
row but the first), and checks that they agree within 3e-6 of the largest
output (max|onnx - hf| <= 3e-6 * max|hf|),
that their fusion summaries are equal, and that the ONNX build matches ONNX
Runtime on the same file within the same bound.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "..", "pylib"))
from check_ort import expect_close  # noqa: E402
from tfc_testing import tfc_run  # noqa: E402

TOLERANCE = 3e-6


def compile_model(bin_dir, args, lib):
    cmd = [os.path.join(bin_dir, "tfc-compile"), *args, "-o", lib]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        sys.exit("tfc-compile failed: " + done.stderr)
    summary = [line for line in done.stderr.splitlines() if "fused" in line]
    print(summary[0])
    return summary[0].split("tfc-compile: ", 1)[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("graph")
    ap.add_argument("model_dir")
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=17)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    graph = os.path.join(args.work, "minilm.onnx")
    shutil.copyfile(args.graph, graph)
    subprocess.run([sys.executable, os.path.join(HERE, "write_data.py"), graph,
                    args.model_dir], check=True)

    sizes = ["--batch", str(args.batch), "--seq-len", str(args.seq_len)]
    onnx_lib = os.path.join(args.work, "onnx.so")
    hf_lib = os.path.join(args.work, "hf.so")
    onnx_fused = compile_model(args.bin, [graph, *sizes], onnx_lib)
    hf_fused = compile_model(
        args.bin, ["--hf", args.model_dir, "--output", "hidden", *sizes],
        hf_lib)
    if onnx_fused != hf_fused:
        sys.exit(f"fusion differs: ONNX '{onnx_fused}', Hugging Face "
                 f"'{hf_fused}'")

    with open(os.path.join(args.model_dir, "config.json")) as f:
        vocab = json.load(f)["vocab_size"]
    seed = int.from_bytes(os.urandom(4), "little")
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, (args.batch, args.seq_len)).astype(np.int64)
    mask = np.ones_like(ids)
    for row in range(1, args.batch):
        mask[row, args.seq_len - rng.integers(1, args.seq_len // 2 + 1):] = 0

    outs = {}
    safetensors = os.path.join(args.model_dir, "model.safetensors")
    for name, lib, weights in (("onnx", onnx_lib, graph),
                               ("hf", hf_lib, safetensors)):
        got, error = tfc_run.run(args.bin, lib, [ids, mask], 1, args.work,
                                 weights=weights, stem=name)
        if error:
            sys.exit(f"tfc-run of the {name} build failed: {error}")
        outs[name] = got[0]
    expect_close("ONNX build against the Hugging Face build", outs["onnx"],
                 outs["hf"].astype(np.float64), seed, TOLERANCE)
    session = ort.InferenceSession(graph, providers=["CPUExecutionProvider"])
    ref = session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    expect_close("ONNX build against ONNX Runtime", outs["onnx"], ref, seed,
                 TOLERANCE)
    print("minilm onnx: OK")


if __name__ == "__main__":
    main()
