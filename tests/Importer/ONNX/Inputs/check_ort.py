"""Compiles an ONNX model with tfc and checks it against ONNX Runtime.

  check_ort.py MODEL.onnx --bin DIR --work DIR --batch B --seq-len S
               [--expect 'fused 2 attention, 2 softmax, ...'] [--seed N]
               [--input-shape NAME=DxD...] [--no-fusion] [--dtype f16|bf16]
               [--compile-flag=--target=nvptx ...]

Fresh random inputs each run (a different seed each time unless given):
token ids in [0, vocab) (the rows of the embedding table the ids index),
an attention mask with a padded tail in every row but the first, float
inputs (a ViT's pixel values) standard normal. ONNX
Runtime runs the same file on them (an input named by --input-shape, such as
an encoder-decoder's decoder_input_ids, takes that shape, which tfc-compile
is given too); tfc's output must match with
max|tfc - ort| <= 1e-4 * max|ort| (f32). With --expect, tfc-compile's fusion
summary must contain that text. With --dtype the model computes in f16 or
bf16 (float inputs rounded to it for both, float outputs in it): against
ONNX Runtime's f32, the bound is the Hugging Face builds' (gpt2.py): 10
units of the type's roundoff (2^-11, 2^-8) on the norm-wise relative error.
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
from tfc_testing.arrays import (bf16_to_f32, f32_to_bf16,  # noqa: E402
                                relative_error)

# --dtype: the numpy type of its arrays in .npy (bf16's bits as '<u2'), the
# values of those arrays as f32, and the bound on the relative error.
DTYPES = {"f16": (np.float16, lambda a: a.astype(np.float32), 10 * 2.0**-11),
          "bf16": (np.uint16, bf16_to_f32, 10 * 2.0**-8)}

VOCAB = 64  # export_models.py's vocabulary


def inputs_for(model, batch, seq, shapes, rng):
    feeds = {}
    for i in model.graph.input:
        if i.name in {t.name for t in model.graph.initializer}:
            continue
        dims = shapes.get(i.name) or [
            d.dim_value if d.dim_value > 0 else (batch if k == 0 else seq)
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


def expect_close(label, got, ref, seed, tol=1e-4):
    """Exits unless f32 `got` is within `tol` of `ref` (of its largest
    element; ONNX Runtime's output); prints the error."""
    if got.shape != ref.shape:
        sys.exit(f"{label}: shape {got.shape}, the reference's {ref.shape}")
    err = float(np.abs(got.astype(np.float64) - ref).max())
    scale = float(np.abs(ref).max()) or 1.0
    print(f"{label}: max abs error {err:.3g}, relative {err / scale:.3g} "
          f"(seed {seed})")
    if not err <= tol * scale:
        sys.exit(f"{label}: relative error {err / scale:.3g} > {tol:g} "
                 f"(seed {seed})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=8)
    ap.add_argument("--expect")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--input-shape", action="append", default=[],
                    metavar="NAME=DxD...", help="one input's shape")
    ap.add_argument("--no-fusion", action="store_true")
    ap.add_argument("--dtype", choices=sorted(DTYPES))
    ap.add_argument("--compile-flag", action="append", default=[],
                    help="another tfc-compile flag (--target=nvptx, ...)")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    seed = args.seed if args.seed is not None else int.from_bytes(
        os.urandom(4), "little")
    rng = np.random.default_rng(seed)
    model = onnx.load(args.model, load_external_data=False)
    shapes = {}
    for given in args.input_shape:
        name, _, dims = given.partition("=")
        shapes[name] = [int(d) for d in dims.split("x")]
    feeds = inputs_for(model, args.batch, args.seq_len, shapes, rng)
    narrow, widen, bound = DTYPES.get(args.dtype, (None, None, None))
    tfc_feeds = dict(feeds)
    for name, value in feeds.items():
        if args.dtype and value.dtype == np.float32:
            tfc_feeds[name] = (f32_to_bf16(value) if args.dtype == "bf16"
                               else value.astype(np.float16))
            feeds[name] = widen(tfc_feeds[name])
    session = ort.InferenceSession(args.model,
                                   providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)

    lib = os.path.join(args.work, "model.so")
    cmd = [os.path.join(args.bin, "tfc-compile"), args.model, "-o", lib,
           "--batch", str(args.batch), "--seq-len", str(args.seq_len)]
    cmd += [f"--input-shape={given}" for given in args.input_shape]
    if args.no_fusion:
        cmd.append("--no-fusion")
    if args.dtype:
        cmd.append("--dtype=" + args.dtype)
    cmd += args.compile_flag
    compiled = subprocess.run(cmd, capture_output=True, text=True)
    sys.stdout.write(compiled.stdout)
    if compiled.returncode != 0:
        sys.exit("tfc-compile failed: " + compiled.stderr)
    summary = compiled.stderr + compiled.stdout
    if args.expect and args.expect not in summary:
        sys.exit(f"expected '{args.expect}' in the fusion summary: {summary}")

    got_all, error = tfc_run.run(args.bin, lib, list(tfc_feeds.values()),
                                 len(expected), args.work, weights=args.model)
    if error:
        sys.exit("tfc-run failed: " + error)
    for k, (got, ref) in enumerate(zip(got_all, expected)):
        if got.shape != ref.shape:
            sys.exit(f"output {k}: shape {got.shape}, ONNX Runtime's "
                     f"{ref.shape}")
        if args.dtype and ref.dtype == np.float32:
            if got.dtype != narrow:
                sys.exit(f"output {k}: {got.dtype}, not {args.dtype}")
            err = relative_error(widen(got), ref)
            print(f"output {k}: norm-wise relative error {err:.3g} "
                  f"(bound {bound:.3g}, seed {seed})")
            if not err <= bound:
                sys.exit(f"output {k}: relative error {err:.3g} > {bound:.3g} "
                         f"(seed {seed})")
            continue
        expect_close(f"output {k}", got, ref, seed)


if __name__ == "__main__":
    main()
