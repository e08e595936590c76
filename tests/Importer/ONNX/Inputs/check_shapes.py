"""Compiles an ONNX model for several batch sizes and lengths into one
library and checks it against ONNX Runtime at other shapes.

  check_shapes.py MODEL.onnx --bin DIR --work DIR --batch 1,3 --seq-len 5,8
                  --run 2x7 --run 4x8 ... [--expect TEXT]

One library (tfc-compile --batch LIST --seq-len LIST), its weights bound
from MODEL; each --run BxS draws fresh inputs of that shape (check_ort.py's:
ids, a padded attention mask) that the runtime runs as the smallest build
holding them (a batch past the largest in slices), and the output must match
ONNX Runtime's within 1e-4 of its largest element (f32).
"""

import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "pylib"))
from check_ort import expect_close, inputs_for  # noqa: E402
from tfc_testing import tfc_run  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--batch", required=True)
    ap.add_argument("--seq-len", required=True)
    ap.add_argument("--run", action="append", required=True,
                    metavar="BxS", help="a shape to run at")
    ap.add_argument("--expect")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    lib = os.path.join(args.work, "model.so")
    compiled = subprocess.run(
        [os.path.join(args.bin, "tfc-compile"), args.model, "-o", lib,
         "--batch", args.batch, "--seq-len", args.seq_len],
        capture_output=True, text=True)
    if compiled.returncode != 0:
        sys.exit("tfc-compile failed: " + compiled.stderr)
    sys.stdout.write(compiled.stderr)
    if args.expect and args.expect not in compiled.stderr:
        sys.exit(f"expected '{args.expect}' in: {compiled.stderr}")

    seed = int.from_bytes(os.urandom(4), "little")
    rng = np.random.default_rng(seed)
    model = onnx.load(args.model, load_external_data=False)
    session = ort.InferenceSession(args.model,
                                   providers=["CPUExecutionProvider"])
    for shape in args.run:
        batch, seq = (int(n) for n in shape.split("x"))
        feeds = inputs_for(model, batch, seq, {}, rng)
        expected = session.run(None, feeds)
        got_all, error = tfc_run.run(args.bin, lib, list(feeds.values()),
                                     len(expected), args.work,
                                     weights=args.model, stem=shape)
        if error:
            sys.exit(f"{shape}: tfc-run failed: {error}")
        for k, (got, ref) in enumerate(zip(got_all, expected)):
            expect_close(f"{shape}: output {k}", got, ref, seed)


if __name__ == "__main__":
    main()
