"""Weights at unaligned offsets of an ONNX model's external data file
(runtime/src/common/Weights.cpp; abi.h, tfc_model_weight_alignment).

A small ONNX graph, built here with onnx: LayerNorm(x) by gamma and beta,
then MatMul(h, w1) + b1, Relu, MatMul(., w2); and MatMul(h, w3) plus
ReduceSum(w3) over its rows (w3 read by the GEMM kernel and by other code).
Its float initializers go to one external data file twice: each at an
offset 1 past a multiple of 4 (none aligned to its f32 elements), and each
at a multiple of 64. Each file's model is compiled (the offsets are the
library's) and bound from its file. Checked:
- the unaligned file's w1 and w2, which only the GEMM kernel reads (it packs
  them), are bound in place: tfc_model_weight_data is the file's byte at
  the tensor's offset (same offset within a page), not an aligned copy;
- its gamma, beta, b1 (read by the LayerNorm kernel and elementwise code)
  and w3 are copied into 64-byte aligned buffers;
- every weight of the aligned file is bound in place;
- so with a library of two batch sizes (--batch 1,3) of the unaligned file,
  which holds w1 and w2 in place only if both builds read them through the
  kernel alone;
- all three give the same outputs, bit for bit, on two runs (the second
  after the file's pages are released), and match float64 numpy within
  1e-5 (norm-wise relative error) on random inputs of odd sizes.
  unaligned_weights.py BINDIR WORKDIR    (the runtime: BINDIR/../lib)
"""
import ctypes
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "..", "runtime",
                                "python"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "pylib"))
import tfc_runtime as tfc  # noqa: E402
from tfc_testing.arrays import relative_error  # noqa: E402
from tfc_testing.checks import Checks  # noqa: E402
from tfc_testing.onnx_files import write_external  # noqa: E402

BATCH, SEQ, HIDDEN, FFN = 3, 7, 37, 53
PACKED_ONLY = ("w1", "w2")
PAGE = 4096


def make_weights(rng):
    def r(*shape, scale=0.3):
        return (rng.standard_normal(shape) * scale).astype(np.float32)
    return {"gamma": 1 + r(HIDDEN), "beta": r(HIDDEN),
            "w1": r(HIDDEN, FFN), "b1": r(FFN), "w2": r(FFN, HIDDEN),
            "w3": r(HIDDEN, HIDDEN)}


def write_model(path, weights, unaligned):
    """path.onnx and path.onnx.data: the weights in the data file, each at
    1 + a multiple of 4 (unaligned) or a multiple of 64. Their offsets."""
    nodes = [
        helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["h"],
                         axis=-1, epsilon=1e-5),
        helper.make_node("MatMul", ["h", "w1"], ["m1"]),
        helper.make_node("Add", ["m1", "b1"], ["a1"]),
        helper.make_node("Relu", ["a1"], ["r1"]),
        helper.make_node("MatMul", ["r1", "w2"], ["m2"]),
        helper.make_node("MatMul", ["h", "w3"], ["m3"]),
        helper.make_node("ReduceSum", ["w3", "axes0"], ["s3"], keepdims=0),
        helper.make_node("Add", ["m3", "s3"], ["a3"]),
        helper.make_node("Add", ["m2", "a3"], ["y"]),
    ]
    return write_external(
        path, nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                       ["batch", SEQ, HIDDEN])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                       ["batch", SEQ, HIDDEN])],
        weights, lambda name, at: ((at + 3) // 4 * 4 + 1 if unaligned
                                   else (at + 63) // 64 * 64),
        [helper.make_tensor("axes0", TensorProto.INT64, [1], [0])],
        "unaligned")


def reference(w, x):
    w = {k: v.astype(np.float64) for k, v in w.items()}
    x = x.astype(np.float64)
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    h = (x - mean) / np.sqrt(var + 1e-5) * w["gamma"] + w["beta"]
    a = np.maximum(h @ w["w1"] + w["b1"], 0)
    return a @ w["w2"] + h @ w["w3"] + w["w3"].sum(0)


def main():
    bindir, work = sys.argv[1:3]
    runtime = os.path.join(bindir, "..", "lib", "libtfcrt.so")
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(20261205)
    weights = make_weights(rng)
    x = rng.standard_normal((BATCH, SEQ, HIDDEN)).astype(np.float32)
    want = reference(weights, x)
    rt = tfc.load_runtime(runtime)
    rt.tfc_model_weight_data.restype = ctypes.c_void_p
    rt.tfc_model_weight_data.argtypes = [ctypes.c_void_p, ctypes.c_int32]
    rt.tfc_model_find_weight.restype = ctypes.c_int32
    rt.tfc_model_find_weight.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    checks = Checks()
    expect = checks.expect
    outputs = {}
    files = {}
    for kind in ("unaligned", "aligned"):
        onnx_path = os.path.join(work, kind + ".onnx")
        files[kind] = (onnx_path,
                       write_model(onnx_path, weights, kind == "unaligned"))
        onnx.checker.check_model(onnx_path)
    for kind, file, batches in (("unaligned", "unaligned", "3"),
                                ("aligned", "aligned", "3"),
                                ("variants", "unaligned", "1,3")):
        onnx_path, offsets = files[file]
        lib = os.path.join(work, kind + ".so")
        subprocess.run([os.path.join(bindir, "tfc-compile"), onnx_path,
                        "--batch", batches, "-o", lib], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with tfc.Model(lib, weights=onnx_path, runtime=rt) as m:
            for name, offset in offsets.items():
                index = rt.tfc_model_find_weight(m._handle, name.encode())
                address = rt.tfc_model_weight_data(m._handle, index)
                in_place = address % PAGE == offset % PAGE
                copied = address % 64 == 0 and offset % 64 != 0
                if kind == "aligned":
                    expect("%s: %s (offset %d) bound in place"
                           % (kind, name, offset), in_place)
                elif name in PACKED_ONLY:
                    expect("%s: %s at offset %d, read only as the GEMM "
                           "kernel packs it, bound in place (address %% 4 "
                           "= %d)" % (kind, name, offset, address % 4),
                           in_place and address % 4 != 0)
                else:
                    expect("%s: %s at offset %d, read by other code too, "
                           "copied to an aligned buffer" % (kind, name,
                                                            offset), copied)
            runs = [m.run(x) for _ in range(2)]
        expect("%s: the second run (pages released) repeats the first"
               % kind, np.array_equal(runs[0], runs[1]))
        err = relative_error(runs[0], want)
        expect("%s: output against float64: rel.err %.1e (bound 1e-5)"
               % (kind, err), err < 1e-5)
        outputs[kind] = runs[0]
    expect("the unaligned file, the aligned one and the unaligned one's "
           "library of two batch sizes give the same output",
           np.array_equal(outputs["unaligned"], outputs["aligned"]) and
           np.array_equal(outputs["unaligned"], outputs["variants"]))
    print("%d failed" % checks.failed)
    sys.exit(1 if checks.failed else 0)


main()
