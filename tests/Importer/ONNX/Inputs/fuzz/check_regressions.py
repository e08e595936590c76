"""The ONNX importer on the inputs its fuzzer found, and on the like: each
is a one-line error naming the file, exit status 1, never a crash.

  check_regressions.py WORK

Each crash-<sha1>.onnx next to this script (found by tfc-fuzz-onnx-import,
reduced) is imported from WORK as the fuzz target imports it: batch 1,
length 4, with weights.bin (the floats 0 to 1023) next to it for external
data to name. Its error must hold the text EXPECTED gives. Then the models
of crafted() (the same faults, written out), and for every operator
`tfc-import --onnx-operators` lists a node of it with no inputs and one
whose first input's name is empty. Prints one line per failure; exits 1 if
any.
"""

import glob
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))

EXPECTED = {
    # Softmax without inputs.
    "crash-773f709576bd9caf1f1706845cfd975eedce43c8.onnx":
        "node 'Softmax11' (Softmax): needs 1 inputs, has 0",
    # Reshape to a shape whose product overflows int64.
    "crash-ef43d529468834f3229f23334f9a9425737fa380.onnx":
        "(Reshape): shape has more than 2^63 elements",
    # Cast of a constant to data type 0, then used.
    "crash-d7a8f4104e11dae2b0b01ee1c4e25b4ca84adbfc.onnx":
        "(Cast): a result of element type UNDEFINED is not supported",
    # Range whose length is past int64 (as a float), and with mixed types.
    "crash-2ef446783413cd2436799065f92315071d6ed26f.onnx":
        "(Range): the range has more than 2^20 elements",
    "crash-405ebc78ed05d0a5b98d63f8c97a5abcaa0e11aa.onnx":
        "(Range): start, limit and delta differ in element type",
    # Range of a start that is not a scalar (no elements).
    "crash-37cc2265827cce029021ad3c9370856168462639.onnx":
        "(Range): start, limit and delta must be scalars",
    # ConstantOfShape of a float shape past int64.
    "crash-301028e3e83abdf17282bf1ff1d831f613e8048c.onnx":
        "(ConstantOfShape): the result has more than 2^28 elements",
    # ReduceSum over the axis NaN (0), in a graph without outputs.
    "crash-ec458fb5617af9a97d628ca5044c2f624e4170e3.onnx":
        "the graph has no outputs",
    # Tile of a constant to 10^17 elements (was folded: out of memory), in
    # a graph without outputs.
    "crash-39133e7ffcd1f2cb811515a68e1f57edb47ac179.onnx":
        "the graph has no outputs",
    # Split sizes whose sum overflows int64.
    "crash-500b4f9bed53209ad787cfc4cc23cf16383441c6.onnx":
        "(Split): split sizes do not add up to dimension 0 (2) over 2 "
        "outputs",
    # Gemm of a float and an int16 matrix.
    "crash-bbd16b608d432ad1a3aaede2afd105fc6f23cdbe.onnx":
        "(Gemm): inputs have different element types",
    # Trilu of a folded empty tensor whose other dims overflow int64 when
    # multiplied, in a graph without outputs.
    "crash-6568bfd0e0ef8012292c2924eb13244be00dffe7.onnx":
        "the graph has no outputs",
    # Concat of one input empty along the axis (then imported), in a graph
    # without outputs.
    "crash-7b539f289f32eb5b5d0c0d3e2b28e06160bff255.onnx":
        "the graph has no outputs",
    # Slice of a scalar.
    "crash-734a61e8869cca7e3d3c27f511812878fdfa6f15.onnx":
        "(Slice): axis 0 is out of range for rank 0",
}


def refused(path, expect):
    """Why `tfc-import path` was not refused with `expect` (a regular
    expression) in one line; None where it was."""
    run = subprocess.run(["tfc-import", path, "--batch", "1", "--seq-len", "4",
                          "-o", os.devnull], capture_output=True, text=True)
    lines = run.stderr.splitlines()
    if run.returncode != 1:
        return f"exit status {run.returncode}: {run.stderr[-400:]!r}"
    if len(lines) != 1 or not lines[0].startswith(
            f"tfc-import: error: {path}: "):
        return f"not one error line naming the file: {run.stderr[-400:]!r}"
    if not re.search(expect, lines[0]):
        return f"expected /{expect}/ in: {lines[0]}"
    return None


def model(nodes, inputs, inits=(), opset=23, outputs=None):
    y = helper.make_tensor_value_info("y", T.FLOAT, None)
    graph = helper.make_graph(nodes, "g", inputs, outputs or [y], list(inits))
    m = helper.make_model(graph,
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


def crafted():
    """(name, model, expected error) of the faults the fuzzer's inputs
    showed, where they have other forms."""
    x = helper.make_tensor_value_info("x", T.FLOAT, [2, 3])
    node = helper.make_node
    big = np.iinfo(np.int64).max
    ext = numpy_helper.from_array(np.zeros(4, np.float32), "w")
    ext.ClearField("raw_data")
    ext.data_location = T.EXTERNAL
    for key, value in (("location", "weights.bin"), ("offset", str(big)),
                       ("length", str(big))):
        ext.external_data.add(key=key, value=value)
    return [
        ("uint8-initializer",
         model([node("Identity", ["u"], ["y"])], [],
               [numpy_helper.from_array(np.arange(3, dtype=np.uint8), "u")]),
         r"initializer 'u': has unsupported data type uint8"),
        ("cast-to-uint16",
         model([node("Cast", ["c"], ["y"], to=T.UINT16)], [],
               [numpy_helper.from_array(np.ones(2, np.float32), "c")]),
         r"\(Cast\): a result of element type UINT16 is not supported"),
        ("range-int64-overflow",
         model([node("Range", ["a", "b", "d"], ["y"])], [],
               [numpy_helper.from_array(np.array(v, np.int64), n)
                for n, v in (("a", big - 3000), ("b", big), ("d", 1))]),
         r"\(Range\): the range leaves the int64 range"),
        ("tile-overflow",
         model([node("Tile", ["x", "r"], ["y"])], [x],
               [numpy_helper.from_array(np.array([1 << 62, 4], np.int64),
                                        "r")]),
         r"\(Tile\): the result has more than 2\^63 elements"),
        ("reshape-overflow",
         model([node("Reshape", ["x", "s"], ["y"])], [x],
               [numpy_helper.from_array(np.array([0, 1 << 62, 8], np.int64),
                                        "s")]),
         r"\(Reshape\): shape has more than 2\^63 elements"),
        ("trilu-huge-mask",
         model([node("Trilu", ["h"], ["y"])],
               [helper.make_tensor_value_info("h", T.FLOAT, [1 << 16] * 2)]),
         r"\(Trilu\): the mask of an input computed at run time would have "
         r"more than 2\^26 elements"),
        ("cumsum-huge-triangle",
         model([node("CumSum", ["h", "a"], ["y"])],
               [helper.make_tensor_value_info("h", T.FLOAT, [2, 1 << 14])],
               [numpy_helper.from_array(np.array(1, np.int64), "a")]),
         r"\(CumSum\): the triangle of an input computed at run time would "
         r"have more than 2\^26 elements"),
        ("trilu-k-empty",
         model([node("Trilu", ["x", "k"], ["y"])], [x],
               [numpy_helper.from_array(np.zeros(0, np.int64), "k")]),
         r"\(Trilu\): k must be a scalar"),
        ("split-num-outputs",
         model([node("Split", ["x"], ["y", "z"], axis=1,
                     num_outputs=1 << 60)], [x], opset=18),
         r"\(Split\): num_outputs is 1152921504606846976, the node has 2 "
         r"outputs"),
        ("gemm-c-rank3",
         model([node("Gemm", ["x", "t", "c"], ["y"])], [x],
               [numpy_helper.from_array(np.ones((3, 2), np.float32), "t"),
                numpy_helper.from_array(np.ones((1, 2, 2), np.float32), "c")]),
         r"\(Gemm\): C has rank 3, more than 2"),
        ("concat-empty-name",
         model([node("Concat", ["x", "", "x"], ["y"], axis=0)], [x]),
         r"\(Concat\): input 1 is required \(its name is empty\)"),
        ("concat-scalars",
         model([node("Concat", ["a", "a"], ["y"], axis=0)], [],
               [numpy_helper.from_array(np.array(1.0, np.float32), "a")]),
         r"\(Concat\): axis 0 is out of range for rank 0"),
        ("required-input-empty",
         model([node("Add", ["x", ""], ["y"])], [x]),
         r"\(Add\): input 1 is required \(its name is empty\)"),
        ("external-offset-overflow",
         model([node("Add", ["x", "w"], ["y"])],
               [helper.make_tensor_value_info("x", T.FLOAT, [4])], [ext]),
         r"initializer 'w': external data file .*weights.bin has 4096 bytes, "
         r"short of offset 9223372036854775807"),
    ]


def node_model(op, inputs, opset):
    x = helper.make_tensor_value_info("x", T.FLOAT, [2, 3])
    return model([helper.make_node(op, inputs, ["y"], name="n")], [x],
                 opset=opset)


def main(work):
    os.makedirs(work, exist_ok=True)
    np.arange(1024, dtype=np.float32).tofile(os.path.join(work, "weights.bin"))
    failures = []
    found = sorted(glob.glob(os.path.join(HERE, "crash-*.onnx")))
    for src in found:
        name = os.path.basename(src)
        if name not in EXPECTED:
            failures.append(f"{name}: not in EXPECTED")
            continue
        path = os.path.join(work, name)
        shutil.copyfile(src, path)
        if (why := refused(path, re.escape(EXPECTED[name]))):
            failures.append(f"{name}: {why}")
    failures += [f"{n}: missing" for n in EXPECTED
                 if not os.path.exists(os.path.join(HERE, n))]
    cases = crafted()
    for name, m, expect in cases:
        path = os.path.join(work, name + ".onnx")
        onnx.save(m, path)
        if (why := refused(path, expect)):
            failures.append(f"{name}: {why}")
    ops = subprocess.run(["tfc-import", "--onnx-operators"], check=True,
                         capture_output=True, text=True).stdout.split()
    assert "Add" in ops and "Slice" in ops, ops
    # An operator the opset does not define yet is refused first.
    absent = r"|ai.onnx operator \w+ does not exist in opset"
    checked = 0
    for op in ops:
        if op == "Constant":
            continue  # takes no inputs
        for opset in (11, 23):
            for name, inputs, expect in (
                    ("none", [], r"needs \d inputs, has 0"),
                    ("empty", [""], r"input 0 is required \(its name is "
                                    r"empty\)|needs \d inputs, has 1")):
                path = os.path.join(work, f"{op}-{opset}-{name}.onnx")
                onnx.save(node_model(op, inputs, opset), path)
                expect = rf"node 'n' \({op}\): ({expect}{absent})"
                if (why := refused(path, expect)):
                    failures.append(f"{op} (opset {opset}, {name}): {why}")
                checked += 1
    for f in failures:
        print("FAIL:", f)
    print(f"check_regressions: {len(found)} fuzzer inputs, {len(cases)} "
          f"crafted, {checked} nodes short of inputs, {len(failures)} "
          "failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
