"""Compiles an ONNX model with tfc and checks it against ONNX Runtime.

  check_ort.py MODEL.onnx --bin DIR --work DIR --batch B --seq-len S
               [--expect 'fused 2 attention, 2 softmax, ...'] [--seed N]
               [--no-fusion] [--compile-flag=--target=nvptx ...]

Fresh random inputs each run (a different seed each time unless given):
token ids in [0, vocab) (the rows of the embedding table the ids index),
an attention mask with a padded tail in every row but the first. ONNX
Runtime runs the same file on them; tfc's output must match with
max|tfc - ort| <= 1e-4 * max|ort| (f32). With --expect, tfc-compile's fusion
summary must contain that text.
"""

import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "pylib"))
from tfc_testing import tfc_run  # noqa: E402

VOCAB = 64  # export_models.py's vocabulary


def inputs_for(model, batch, seq, rng):
    feeds = {}
    for i in model.graph.input:
        if i.name in {t.name for t in model.graph.initializer}:
            continue
        dims = [d.dim_value if d.dim_value > 0 else (batch if k == 0 else seq)
                for k, d in enumerate(i.type.tensor_type.shape.dim)]
        if i.name == "attention_mask":
            m = np.ones(dims, np.int64)
            for row in range(1, dims[0]):
                m[row, dims[1] - rng.integers(1, max(2, dims[1] // 2)):] = 0
            feeds[i.name] = m
        elif i.type.tensor_type.elem_type == onnx.TensorProto.INT64:
            feeds[i.name] = rng.integers(0, VOCAB, dims).astype(np.int64)
        else:
            feeds[i.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=8)
    ap.add_argument("--expect")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--no-fusion", action="store_true")
    ap.add_argument("--compile-flag", action="append", default=[],
                    help="another tfc-compile flag (--target=nvptx, ...)")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    seed = args.seed if args.seed is not None else int.from_bytes(
        os.urandom(4), "little")
    rng = np.random.default_rng(seed)
    model = onnx.load(args.model, load_external_data=False)
    feeds = inputs_for(model, args.batch, args.seq_len, rng)
    session = ort.InferenceSession(args.model,
                                   providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)

    lib = os.path.join(args.work, "model.so")
    cmd = [os.path.join(args.bin, "tfc-compile"), args.model, "-o", lib,
           "--batch", str(args.batch), "--seq-len", str(args.seq_len)]
    if args.no_fusion:
        cmd.append("--no-fusion")
    cmd += args.compile_flag
    compiled = subprocess.run(cmd, capture_output=True, text=True)
    sys.stdout.write(compiled.stdout)
    if compiled.returncode != 0:
        sys.exit("tfc-compile failed: " + compiled.stderr)
    summary = compiled.stderr + compiled.stdout
    if args.expect and args.expect not in summary:
        sys.exit(f"expected '{args.expect}' in the fusion summary: {summary}")

    got_all, error = tfc_run.run(args.bin, lib, list(feeds.values()),
                                 len(expected), args.work, weights=args.model)
    if error:
        sys.exit("tfc-run failed: " + error)
    for k, (got, ref) in enumerate(zip(got_all, expected)):
        if got.shape != ref.shape:
            sys.exit(f"output {k}: shape {got.shape}, ONNX Runtime's "
                     f"{ref.shape}")
        err = float(np.abs(got.astype(np.float64) - ref).max())
        scale = float(np.abs(ref).max()) or 1.0
        print(f"output {k}: max abs error {err:.3g}, relative "
              f"{err / scale:.3g} (seed {seed})")
        if not err <= 1e-4 * scale:
            sys.exit(f"output {k}: relative error {err / scale:.3g} > 1e-4 "
                     f"(seed {seed})")


if __name__ == "__main__":
    main()
