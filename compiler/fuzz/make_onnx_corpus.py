"""Writes the seed corpus of tfc-fuzz-onnx-import into a folder.

  python3 compiler/fuzz/make_onnx_corpus.py compiler/fuzz/corpus-onnx

One small model per path of the ONNX importer: each operator group, the
opset-dependent forms (axes as attributes or inputs, the pre-10 Slice),
initializers inline (raw_data, typed fields, each element type) and in
external data, the shape arithmetic exporters write (folded on the host),
dynamic dimensions, and the files the importer refuses. The fuzz target
writes each input as model.onnx next to weights.bin (the floats 0 to
1023), which the external-data seeds name. seed-torchscript.onnx
(an exported encoder layer) and ops11.onnx, weights.onnx came before this
script and are kept as they are.
"""

import os
import sys

import numpy as np
from onnx import TensorProto as T
from onnx import helper, numpy_helper

F, I64, I32, B = T.FLOAT, T.INT64, T.INT32, T.BOOL
F16, BF16 = T.FLOAT16, T.BFLOAT16
node = helper.make_node


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def const(name, value, dtype):
    return numpy_helper.from_array(np.array(value, dtype=dtype), name)


def model(nodes, inputs, outputs, inits=(), opset=17, ir=8, domains=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    sets = [helper.make_opsetid("", opset)]
    sets += [helper.make_opsetid(d, v) for d, v in domains]
    m = helper.make_model(graph, opset_imports=sets,
                          producer_name="make_onnx_corpus")
    m.ir_version = ir
    return m


def unary():
    ops = ["Exp", "Erf", "Tanh", "Sigmoid", "Relu", "Neg", "Abs", "Floor",
           "Ceil", "Sin", "Cos", "Identity", "Sqrt", "Reciprocal", "Log"]
    nodes, prev = [], "x"
    for k, op in enumerate(ops):
        nodes.append(node(op, [prev], [f"t{k}"], name=op))
        prev = f"t{k}"
    nodes.append(node("Gelu", [prev], ["g"], approximate="tanh"))
    nodes.append(node("Gelu", ["g"], ["y"]))
    return model(nodes, [vi("x", F, [2, 3])], [vi("y", F, [2, 3])],
                 opset=23, ir=10)


def binary():
    nodes = [node("Add", ["x", "b"], ["a"]),
             node("Sub", ["a", "x"], ["s"]),
             node("Mul", ["s", "b"], ["m"]),
             node("Div", ["m", "d"], ["q"]),
             node("Div", ["q", "b"], ["q2"]),
             node("Pow", ["q2", "p"], ["w"]),
             node("Max", ["w", "x", "b"], ["mx"]),
             node("Min", ["mx", "x"], ["y"])]
    return model(nodes, [vi("x", F, [2, 3, 5]), vi("b", F, [3, 1])],
                 [vi("y", F, [2, 3, 5])],
                 [const("d", 8.0, np.float32), const("p", 2.0, np.float32)])


def compare_logic():
    nodes = [node("Equal", ["i", "j"], ["e"]),
             node("Less", ["i", "j"], ["l"]),
             node("Greater", ["i", "j"], ["g"]),
             node("LessOrEqual", ["i", "j"], ["le"]),
             node("GreaterOrEqual", ["i", "j"], ["ge"]),
             node("And", ["e", "l"], ["a"]),
             node("Or", ["a", "g"], ["o"]),
             node("Xor", ["o", "le"], ["xo"]),
             node("Not", ["xo"], ["n"]),
             node("IsNaN", ["x"], ["nan"]),
             node("Or", ["n", "nan"], ["c"]),
             node("Where", ["c", "x", "z"], ["y"])]
    return model(nodes, [vi("i", I64, [3, 4]), vi("j", I64, [4]),
                         vi("x", F, [3, 4])], [vi("y", F, [3, 4])],
                 [const("z", 0.0, np.float32)], opset=20, ir=9)


def cast_clip():
    nodes = [node("Cast", ["x"], ["i"], to=I64),
             node("Cast", ["i"], ["bo"], to=B),
             node("Cast", ["x"], ["h"], to=F16),
             node("CastLike", ["bo", "x"], ["f"]),
             node("Clip", ["x", "lo", "hi"], ["c"]),
             node("Clip", ["c", "", "hi"], ["c2"]),
             node("Dropout", ["c2"], ["d"], ratio=0.5),
             node("Add", ["d", "f"], ["y"])]
    return model(nodes, [vi("x", F, [4, 3])],
                 [vi("y", F, [4, 3]), vi("h", F16, [4, 3])],
                 [const("lo", -0.5, np.float32), const("hi", 0.7, np.float32)])


def clip6():
    nodes = [node("Clip", ["x"], ["y"], min=-1.0, max=1.0)]
    return model(nodes, [vi("x", F, [5])], [vi("y", F, [5])], opset=6, ir=3)


def matmul():
    rng = np.random.default_rng(1)
    nodes = [node("MatMul", ["x", "w"], ["m"]),
             node("MatMul", ["m", "v"], ["mv"]),
             node("Gemm", ["a", "bt", "c"], ["gm"], transA=1, transB=1,
                  alpha=0.5, beta=2.0),
             node("Gemm", ["a", "bt"], ["gm2"], transA=1, transB=1)]
    return model(nodes, [vi("x", F, [2, 3, 5]), vi("v", F, [6]),
                         vi("a", F, [5, 3]), vi("bt", F, [4, 5])],
                 [vi("mv", F, [2, 3]), vi("gm", F, [3, 4]),
                  vi("gm2", F, [3, 4])],
                 [const("w", rng.standard_normal((5, 6)), np.float32),
                  const("c", [1, 2, 3, 4], np.float32)])


def softmax13():
    nodes = [node("Softmax", ["x"], ["s"], axis=1),
             node("LogSoftmax", ["s"], ["y"])]
    return model(nodes, [vi("x", F, [2, 3, 5])], [vi("y", F, [2, 3, 5])],
                 opset=13, ir=7)


def norms():
    nodes = [node("LayerNormalization", ["x", "g", "b"], ["l"], epsilon=1e-5),
             node("LayerNormalization", ["l", "g2"], ["l2"], axis=-2),
             node("RMSNormalization", ["l2", "g"], ["y"], epsilon=1e-6)]
    return model(nodes, [vi("x", F, [2, 3, 6])], [vi("y", F, [2, 3, 6])],
                 [const("g", np.linspace(0.5, 1.5, 6), np.float32),
                  const("b", np.zeros(6), np.float32),
                  const("g2", np.ones((3, 6)), np.float32)], opset=23, ir=10)


def reduce(opset):
    nodes, prev = [], "x"
    for k, op in enumerate(["ReduceSum", "ReduceMean", "ReduceMax",
                            "ReduceMin"]):
        ins = [prev]
        attrs = {"keepdims": 1}
        if opset >= 18:
            ins.append("axes")
        else:
            attrs["axes"] = [-1]
        nodes.append(node(op, ins, [f"r{k}"], **attrs))
        prev = f"r{k}"
    nodes.append(node("ReduceSum", [prev], ["y"], keepdims=0))
    inits = [const("axes", [-1], np.int64)] if opset >= 18 else []
    return model(nodes, [vi("x", F, [2, 3, 5])], [vi("y", F, [])], inits,
                 opset=opset, ir=8 if opset >= 18 else 6)


def reduce_more():
    ops = ["ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum",
           "ReduceLogSumExp"]
    nodes = [node("Abs", ["x"], ["a"])]
    nodes += [node(op, ["a", "axes"], [f"r{k}"], keepdims=0)
              for k, op in enumerate(ops)]
    nodes += [node("Add", ["r0", "r1"], ["s0"]),
              node("Add", ["s0", "r2"], ["s1"]),
              node("Add", ["s1", "r3"], ["s2"]),
              node("Add", ["s2", "r4"], ["y"])]
    return model(nodes, [vi("x", F, [2, 3, 5])], [vi("y", F, [2, 3])],
                 [const("axes", [-1], np.int64)], opset=18, ir=8)


def conv():
    rng = np.random.default_rng(5)
    nodes = [node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3],
                  pads=[1, 1, 1, 1], strides=[2, 1], dilations=[1, 2],
                  group=2),
             node("Conv", ["c", "w1"], ["y"], auto_pad="SAME_UPPER"),
             node("Conv", ["s", "w2"], ["y1"], pads=[2, 0])]
    return model(nodes, [vi("x", F, [1, 4, 7, 9]), vi("s", F, [1, 2, 11])],
                 [vi("y", F, None), vi("y1", F, None)],
                 [const("w", rng.standard_normal((6, 2, 3, 3)), np.float32),
                  const("b", np.arange(6), np.float32),
                  const("w1", rng.standard_normal((3, 6, 1, 1)), np.float32),
                  const("w2", rng.standard_normal((4, 2, 3)), np.float32)],
                 opset=22, ir=10)


def attention_op():
    """ONNX's own Attention (opset 23): 4-D heads, 3-D with head counts,
    causal, a mask and a soft cap."""
    nodes = [node("Attention", ["q", "k", "v", "m"], ["o"], is_causal=0,
                  scale=0.25),
             node("Attention", ["q3", "k3", "v3"], ["o3"], q_num_heads=4,
                  kv_num_heads=2, is_causal=1, softcap=30.0)]
    return model(nodes, [vi("q", F, [1, 2, 3, 8]), vi("k", F, [1, 2, 5, 8]),
                         vi("v", F, [1, 2, 5, 8]), vi("m", B, [3, 5]),
                         vi("q3", F, [1, 3, 32]), vi("k3", F, [1, 3, 16]),
                         vi("v3", F, [1, 3, 16])],
                 [vi("o", F, None), vi("o3", F, None)], opset=23, ir=10)


def scatter():
    nodes = [node("ScatterND", ["x", "i", "u"], ["s"]),
             node("ScatterND", ["c", "ic", "uc"], ["sc"], reduction="add"),
             node("Add", ["s", "sc"], ["y"])]
    return model(nodes, [vi("x", F, [4, 3]), vi("u", F, [2, 3])],
                 [vi("y", F, [4, 3])],
                 [const("i", [[1], [3]], np.int64),
                  const("c", np.ones((4, 3)), np.float32),
                  const("ic", [[0, 1], [2, 2]], np.int64),
                  const("uc", [5, 6], np.float32)], opset=18, ir=8)


def shape_ops():
    nodes = [node("Reshape", ["x", "rs"], ["r"]),
             node("Transpose", ["r"], ["t"], perm=[2, 0, 1]),
             node("Unsqueeze", ["t", "ax0"], ["u"]),
             node("Squeeze", ["u", "ax0"], ["sq"]),
             node("Flatten", ["sq"], ["fl"], axis=1),
             node("Concat", ["fl", "fl"], ["cc"], axis=-1),
             node("Split", ["cc", "sp"], ["s0", "s1"], axis=1),
             node("Slice", ["s1", "st", "en", "sax", "ss"], ["sl"]),
             node("Expand", ["sl", "ex"], ["e"]),
             node("Tile", ["e", "rep"], ["ti"]),
             node("Trilu", ["ti"], ["tr"], upper=0),
             node("CumSum", ["tr", "cax"], ["y"], exclusive=1, reverse=1)]
    return model(nodes, [vi("x", F, [2, 3, 4])], [vi("y", F, None)],
                 [const("rs", [0, -1, 2], np.int64),
                  const("ax0", [0], np.int64),
                  const("sp", [10, 14], np.int64),
                  const("st", [-1], np.int64), const("en", [-8], np.int64),
                  const("sax", [1], np.int64), const("ss", [-1], np.int64),
                  const("ex", [3, 1, 1], np.int64),
                  const("rep", [1, 1, 2], np.int64),
                  const("cax", 1, np.int32)], opset=18, ir=8)


def legacy_shape():
    nodes = [node("Slice", ["x"], ["s"], starts=[0, 1], ends=[2, 100],
                  axes=[0, 1]),
             node("Unsqueeze", ["s"], ["u"], axes=[0]),
             node("Squeeze", ["u"], ["q"], axes=[0]),
             node("Split", ["q"], ["a", "b"], axis=1, split=[1, 2]),
             node("ReduceMean", ["b"], ["y"], axes=[1], keepdims=0)]
    return model(nodes, [vi("x", F, [3, 4])], [vi("y", F, [2]),
                                               vi("a", F, [2, 1])],
                 opset=9, ir=4)


def gather():
    nodes = [node("Gather", ["emb", "ids"], ["g"]),
             node("Gather", ["g", "neg"], ["g1"], axis=-1),
             node("GatherElements", ["x", "ge"], ["gel"], axis=1),
             node("GatherND", ["x", "gnd"], ["gn"]),
             node("Add", ["gel", "gn"], ["y"])]
    rng = np.random.default_rng(2)
    return model(nodes, [vi("ids", I64, [2, 3]), vi("x", F, [2, 4])],
                 [vi("g1", F, [2, 3]), vi("y", F, [2, 2])],
                 [const("emb", rng.standard_normal((10, 8)), np.float32),
                  const("neg", -1, np.int64),
                  const("ge", [[0, 3], [1, 2]], np.int64),
                  const("gnd", [[0, 1], [1, 3]], np.int64)])


def constants():
    tensor = helper.make_tensor("v", F, [2, 2], [1, 2, 3, 4])
    nodes = [node("Constant", [], ["c0"], value=tensor),
             node("Constant", [], ["c1"], value_float=0.5),
             node("Constant", [], ["c2"], value_floats=[1.0, 2.0]),
             node("Constant", [], ["c3"], value_int=2),
             node("Constant", [], ["c4"], value_ints=[2, 2]),
             node("ConstantOfShape", ["c4"], ["c5"],
                  value=helper.make_tensor("f", F, [1], [3.0])),
             node("Range", ["r0", "c3", "r1"], ["r"]),
             node("Shape", ["x"], ["sh"], start=1, end=-1),
             node("Size", ["x"], ["sz"]),
             node("Add", ["c0", "c5"], ["a"]),
             node("Mul", ["a", "c1"], ["b"]),
             node("Add", ["b", "c2"], ["y"])]
    return model(nodes, [vi("x", F, [2, 3, 4])],
                 [vi("y", F, [2, 2]), vi("r", I64, None),
                  vi("sh", I64, None), vi("sz", I64, None)],
                 [const("r0", 0, np.int64), const("r1", 1, np.int64)],
                 opset=21, ir=10)


def fold_shape():
    """What the exporters write: shapes read back and rebuilt."""
    rng = np.random.default_rng(3)
    nodes = [node("Shape", ["ids"], ["s"]),
             node("Gather", ["s", "one"], ["len"], axis=0),
             node("Unsqueeze", ["len", "ax0"], ["len1"]),
             node("Range", ["zero", "len", "one"], ["pos"]),
             node("Unsqueeze", ["pos", "ax0"], ["pos1"]),
             node("Gather", ["wpe", "pos1"], ["pe"]),
             node("Gather", ["wte", "ids"], ["te"]),
             node("Add", ["te", "pe"], ["h"]),
             node("Concat", ["minus1", "len1", "four"], ["shp"], axis=0),
             node("Reshape", ["h", "shp"], ["hr"]),
             node("ConstantOfShape", ["s"], ["ones"],
                  value=helper.make_tensor("o", I64, [1], [1])),
             node("Equal", ["ones", "mask"], ["eq"]),
             node("Cast", ["eq"], ["eqf"], to=F),
             node("Where", ["eq", "zf", "big"], ["bias"]),
             node("Unsqueeze", ["bias", "ax2"], ["bias2"]),
             node("Add", ["hr", "bias2"], ["y0"]),
             node("Unsqueeze", ["eqf", "ax2"], ["eqf2"]),
             node("Mul", ["y0", "eqf2"], ["y"])]
    return model(nodes, [vi("ids", I64, ["batch", "sequence"]),
                         vi("mask", I64, ["batch", "sequence"])],
                 [vi("y", F, None)],
                 [const("wte", rng.standard_normal((11, 8)), np.float32),
                  const("wpe", rng.standard_normal((16, 8)), np.float32),
                  const("zero", 0, np.int64), const("one", 1, np.int64),
                  const("ax0", [0], np.int64), const("ax2", [2, 3], np.int64),
                  const("minus1", [-1], np.int64),
                  const("four", [2, 4], np.int64),
                  const("zf", 0.0, np.float32),
                  const("big", -1e9, np.float32)], opset=18, ir=8)


def dynamic():
    nodes = [node("MatMul", ["x", "w"], ["m"]),
             node("Add", ["m", "z"], ["y"])]
    return model(nodes, [vi("x", F, ["batch", "sequence", 4]),
                         vi("z", F, ["batch", "sequence", 3])],
                 [vi("y", F, ["batch", "sequence", 3])],
                 [const("w", np.ones((4, 3)), np.float32)])


def typed_initializers():
    """Initializers in typed fields and each element type, not raw_data."""
    inits = [helper.make_tensor("fd", F, [20], np.arange(20) * 0.5),
             helper.make_tensor("id", I64, [2], [1, 2]),
             helper.make_tensor("i32", I32, [2], [3, 4]),
             helper.make_tensor("dd", T.DOUBLE, [2], [0.25, 0.5]),
             helper.make_tensor("hf", F16, [2],
                                np.array([1, 2], np.float16).view(np.uint16)),
             helper.make_tensor("bf", BF16, [2], [0x3f80, 0x4000]),
             helper.make_tensor("bo", B, [2], [True, False]),
             numpy_helper.from_array(np.arange(2, dtype=np.float16), "hr"),
             numpy_helper.from_array(np.arange(80, dtype=np.float32)
                                     .reshape(10, 8), "big")]
    nodes = [node("Cast", ["dd"], ["d32"], to=F),
             node("Cast", ["hf"], ["h32"], to=F),
             node("Cast", ["bf"], ["b32"], to=F),
             node("Cast", ["id"], ["i2"], to=F),
             node("Cast", ["i32"], ["i3"], to=F),
             node("Cast", ["hr"], ["hr32"], to=F),
             node("Where", ["bo", "d32", "h32"], ["w"]),
             node("Add", ["w", "b32"], ["a"]),
             node("Add", ["a", "i2"], ["a2"]),
             node("Add", ["a2", "i3"], ["a3"]),
             node("Add", ["a3", "hr32"], ["a4"]),
             node("Reshape", ["fd", "fs"], ["f2"]),
             node("MatMul", ["f2", "big"], ["mm"]),
             node("Unsqueeze", ["a4", "ax"], ["a5"]),
             node("Add", ["x", "a5"], ["s"]),
             node("MatMul", ["s", "mm"], ["y"])]
    inits.append(const("fs", [2, 10], np.int64))
    inits.append(const("ax", [0], np.int64))
    return model(nodes, [vi("x", F, [3, 2])], [vi("y", F, None)], inits,
                 opset=19, ir=9)


def external(name, location="weights.bin", offset=0, length=None,
             dims=(8, 4)):
    """An initializer in external data (the fuzz target's weights.bin)."""
    w = numpy_helper.from_array(np.zeros(dims, np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = T.EXTERNAL
    entries = [("location", location), ("offset", str(offset))]
    if length is not None:
        entries.append(("length", str(length)))
    for key, value in entries:
        w.external_data.add(key=key, value=value)
    s = numpy_helper.from_array(np.zeros(4, np.float32), "s")
    s.ClearField("raw_data")
    s.data_location = T.EXTERNAL
    for key, value in (("location", location), ("offset", "64"),
                       ("length", "16")):
        s.external_data.add(key=key, value=value)
    nodes = [node("Add", ["x", "w"], ["a"]), node("Mul", ["a", "s"], ["y"])]
    return model(nodes, [vi("x", F, list(dims))], [vi("y", F, list(dims))],
                 [w, s], opset=18, ir=8)


def attention():
    """One attention block as the TorchScript exporter writes it."""
    rng = np.random.default_rng(4)
    w = lambda n: const(n, rng.standard_normal((8, 8)) * 0.1, np.float32)
    nodes = [node("MatMul", ["x", "wq"], ["q"]),
             node("MatMul", ["x", "wk"], ["k"]),
             node("MatMul", ["x", "wv"], ["v"]),
             node("Reshape", ["q", "heads"], ["q4"]),
             node("Reshape", ["k", "heads"], ["k4"]),
             node("Reshape", ["v", "heads"], ["v4"]),
             node("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3]),
             node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
             node("Transpose", ["v4"], ["vt"], perm=[0, 2, 1, 3]),
             node("MatMul", ["qt", "kt"], ["sc"]),
             node("Div", ["sc", "sqrtd"], ["sd"]),
             node("Unsqueeze", ["mask", "ax12"], ["m4"]),
             node("Cast", ["m4"], ["mf"], to=F),
             node("Sub", ["onef", "mf"], ["inv"]),
             node("Mul", ["inv", "fmin"], ["bias"]),
             node("Add", ["sd", "bias"], ["sb"]),
             node("Softmax", ["sb"], ["p"], axis=-1),
             node("MatMul", ["p", "vt"], ["o"]),
             node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
             node("Reshape", ["ot", "merged"], ["om"]),
             node("LayerNormalization", ["om", "g", "b"], ["y"])]
    return model(nodes, [vi("x", F, ["batch", "sequence", 8]),
                         vi("mask", I64, ["batch", "sequence"])],
                 [vi("y", F, ["batch", "sequence", 8])],
                 [w("wq"), w("wk"), w("wv"),
                  const("heads", [0, 0, 2, 4], np.int64),
                  const("merged", [0, 0, 8], np.int64),
                  const("sqrtd", 2.0, np.float32),
                  const("ax12", [1, 2], np.int64),
                  const("onef", 1.0, np.float32),
                  const("fmin", -3.4e38, np.float32),
                  const("g", np.ones(8), np.float32),
                  const("b", np.zeros(8), np.float32)])


def refused():
    """Files the importer refuses, each at a different check."""
    x, y = vi("x", F, [2, 4]), vi("y", F, [2, 4])
    relu = [node("Relu", ["x"], ["y"], name="relu")]
    custom = model([node("FusedGelu", ["x"], ["y"], domain="com.microsoft")],
                   [x], [y], domains=[("com.microsoft", 1)])
    return {
        "refused-op.onnx": model([node("Frobnicate", ["x"], ["y"])], [x], [y]),
        "refused-domain.onnx": custom,
        "refused-undefined.onnx": model([node("Add", ["x", "b"], ["y"])],
                                        [x], [y]),
        "refused-no-shape.onnx": model(relu, [vi("x", F, None)], [y]),
        "refused-double.onnx": model(relu, [vi("x", T.DOUBLE, [2])], [y]),
        "refused-no-output.onnx": model(relu, [x], [vi("z", F, [2, 4])]),
        "refused-ir.onnx": model(relu, [x], [y], ir=12, opset=25),
        "refused-ext-missing.onnx": external("w", location="absent.bin"),
        "refused-ext-short.onnx": external("w", offset=4096, length=128),
    }


def main(out):
    os.makedirs(out, exist_ok=True)
    models = {
        "unary.onnx": unary(), "binary.onnx": binary(),
        "compare-logic.onnx": compare_logic(), "cast-clip.onnx": cast_clip(),
        "clip-opset6.onnx": clip6(), "matmul.onnx": matmul(),
        "softmax13.onnx": softmax13(), "norms.onnx": norms(),
        "reduce13.onnx": reduce(13), "reduce18.onnx": reduce(18),
        "reduce-more.onnx": reduce_more(), "conv.onnx": conv(),
        "attention-op.onnx": attention_op(), "scatter.onnx": scatter(),
        "shape-ops.onnx": shape_ops(), "legacy-shape.onnx": legacy_shape(),
        "gather.onnx": gather(), "constants.onnx": constants(),
        "fold-shape.onnx": fold_shape(), "dynamic.onnx": dynamic(),
        "typed-initializers.onnx": typed_initializers(),
        "external.onnx": external("w", length=128),
        "external-no-length.onnx": external("w", offset=128,
                                            dims=(248, 4)),
        "attention.onnx": attention(),
    }
    models.update(refused())
    for name, m in sorted(models.items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(m.SerializeToString())


if __name__ == "__main__":
    main(sys.argv[1])
