"""Conv and ScatterND nodes tfc refuses, each imported on its own.

  op_errors.py --bin DIR --work DIR

Writes one single-node model per case and runs tfc-import on it; prints
`case: <tfc-import's error line>` for each; exits non-zero if any exit
status is not 1. ops.test checks the lines.
"""

import argparse
import os
import subprocess
import sys

import onnx
from onnx import TensorProto as T
from onnx import helper

F, I64, I32 = T.FLOAT, T.INT64, T.INT32


def one_node(op, inputs, opset=23, **attrs):
    """A model of one node `op` named "n" on graph inputs `inputs`
    (name, type, shape)."""
    vis = [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs]
    node = helper.make_node(op, [n for n, _, _ in inputs], ["y"], name="n",
                            **attrs)
    g = helper.make_graph([node], "g", vis,
                          [helper.make_tensor_value_info("y", F, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


def conv(x=(1, 2, 5, 5), w=(3, 2, 3, 3), b=None, xt=F, wt=F, **attrs):
    ins = [("x", xt, list(x)), ("w", wt, list(w))]
    if b:
        ins.append(("b", F, list(b)))
    return one_node("Conv", ins, **attrs)


def scatter(data=(4, 3), idx=(2, 1), upd=(2, 3), dt=F, it=I64, ut=F,
            **attrs):
    return one_node("ScatterND", [("data", dt, list(data)),
                                  ("idx", it, list(idx)),
                                  ("upd", ut, list(upd))], **attrs)


CASES = {
    "conv-kernel-shape": conv(kernel_shape=[2, 2]),
    "conv-strides": conv(strides=[1]),
    "conv-stride-zero": conv(strides=[0, 1]),
    "conv-auto-pad": conv(auto_pad="SAME"),
    "conv-negative-pad": conv(pads=[0, -1, 0, 0]),
    "conv-kernel-large": conv(w=(3, 2, 7, 3)),
    "conv-int": conv(xt=I32, wt=I32),
    "conv-rank": conv(x=(1, 2), w=(3, 2)),
    "conv-weight-rank": conv(w=(3, 2, 3)),
    "conv-group": conv(w=(3, 1, 3, 3), group=2),
    "conv-bias": conv(b=(2,)),
    "scatter-index-depth": scatter(idx=(2, 3)),
    "scatter-updates": scatter(upd=(2, 4)),
    "scatter-types": scatter(ut=I64),
    "scatter-index-type": scatter(it=F),
    "scatter-reduction": scatter(reduction="sum"),
    "scatter-huge": scatter(data=(1 << 31, 1), upd=(2, 1)),
    "scatter-many-updates": scatter(idx=(300, 1), upd=(300, 3),
                                    reduction="add"),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    # An index out of range, known when the model compiles.
    m = scatter()
    m.graph.input.pop(1)
    m.graph.initializer.append(helper.make_tensor("idx", I64, [2, 1], [1, -5]))
    CASES["scatter-index-range"] = m
    wrong = []
    for name, model in CASES.items():
        path = os.path.join(args.work, name + ".onnx")
        onnx.save(model, path)
        r = subprocess.run([os.path.join(args.bin, "tfc-import"), path, "-o",
                            os.devnull], capture_output=True, text=True)
        line = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
        print(f"{name}: {line.replace(args.work + os.sep, '')}")
        if r.returncode != 1:
            wrong.append(f"{name}: exit status {r.returncode}, not 1")
    if wrong:
        sys.exit("\n".join(wrong))


if __name__ == "__main__":
    main()
