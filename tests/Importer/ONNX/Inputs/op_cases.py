"""Every operator the ONNX importer translates, checked against ONNX Runtime.

  op_cases.py --bin DIR --work DIR [--seed N] [--no-fusion]

Builds one model per operator set version (most cases at opset 23; the
pre-13 Softmax at 11) whose outputs are the cases below, each on its own
inputs, odd sizes included, so that one compile covers them all. Inputs are
fresh random values; ONNX Runtime runs the same file. Each output must match
to 1e-5 relative to its largest magnitude (1e-4 for the normalisations and
products), integer and bool outputs exactly.
"""

import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "pylib"))
from tfc_testing import tfc_run  # noqa: E402

F, I64, B = T.FLOAT, T.INT64, T.BOOL


class Builder:
    def __init__(self, rng):
        self.rng, self.nodes, self.inputs, self.outputs = rng, [], [], []
        self.inits, self.feeds, self.tolerance = [], {}, {}

    def input(self, case, shape, kind="normal", dtype=F):
        name = f"{case}_in{len([i for i in self.inputs if i.name.startswith(case + '_in')])}"
        self.inputs.append(helper.make_tensor_value_info(name, dtype, shape))
        r = self.rng
        if kind == "normal":
            v = r.standard_normal(shape).astype(np.float32)
        elif kind == "positive":
            v = (r.random(shape) + 0.1).astype(np.float32)
        elif kind.startswith("idx"):
            v = r.integers(0, int(kind[3:]), shape).astype(np.int64)
        elif kind == "bool":
            v = r.random(shape) < 0.5
        self.feeds[name] = v
        return name

    def const(self, case, value, dtype=None):
        name = f"{case}_c{len(self.inits)}"
        arr = np.array(value, dtype=dtype)
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def node(self, case, op, ins, n_out=1, out_types=(F,), tol=1e-5, **attrs):
        outs = [f"{case}_out{k}" for k in range(n_out)]
        self.nodes.append(helper.make_node(op, ins, outs, name=case, **attrs))
        for k, o in enumerate(outs):
            t = out_types[k] if k < len(out_types) else out_types[-1]
            self.outputs.append(helper.make_tensor_value_info(o, t, None))
            self.tolerance[o] = tol
        return outs

    def model(self, opset):
        g = helper.make_graph(self.nodes, "ops", self.inputs, self.outputs,
                              self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 10
        return m


def cases_23(b):
    def unary(op, kind="normal", **kw):
        b.node(op, op, [b.input(op, [3, 5], kind)], **kw)
    for op in ["Exp", "Erf", "Tanh", "Sigmoid", "Relu", "Neg", "Abs",
               "Floor", "Ceil", "Sin", "Cos", "Identity"]:
        unary(op)
    for op in ["Sqrt", "Reciprocal", "Log"]:
        unary(op, "positive")
    b.node("GeluNone", "Gelu", [b.input("GeluNone", [2, 7])])
    b.node("GeluTanh", "Gelu", [b.input("GeluTanh", [2, 7])],
           approximate="tanh")
    for op in ["Add", "Sub", "Mul", "Max", "Min"]:
        b.node(op, op, [b.input(op, [2, 3, 5]), b.input(op, [3, 1])])
    b.node("Div", "Div", [b.input("Div", [2, 3, 5]),
                          b.input("Div", [5], "positive")])
    b.node("DivConst", "Div", [b.input("DivConst", [4, 6]),
                               b.const("DivConst", 8.0, np.float32)])
    b.node("DivSqrt", "Div", [b.input("DivSqrt", [4, 6]),
                              b.node("DivSqrtS", "Sqrt",
                                     [b.input("DivSqrtS", [4, 1],
                                              "positive")])[0]])
    b.node("Pow", "Pow", [b.input("Pow", [3, 4], "positive"),
                          b.const("Pow", 3.0, np.float32)])
    b.node("Max3", "Max", [b.input("Max3", [4]), b.input("Max3", [2, 4]),
                           b.input("Max3", [3, 1, 1])])
    for op in ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"]:
        x = b.input(op, [3, 4], "idx3", I64)
        y = b.input(op, [4], "idx3", I64)
        b.node(op, op, [x, y], out_types=(B,))
    for op in ["And", "Or", "Xor"]:
        b.node(op, op, [b.input(op, [3, 4], "bool", B),
                        b.input(op, [4], "bool", B)], out_types=(B,))
    b.node("Not", "Not", [b.input("Not", [5], "bool", B)], out_types=(B,))
    b.node("Where", "Where", [b.input("Where", [3, 1], "bool", B),
                              b.input("Where", [3, 4]),
                              b.input("Where", [4])])
    b.node("IsNaN", "IsNaN", [b.node("IsNaNLog", "Log",
                                     [b.input("IsNaNLog", [6])])[0]],
           out_types=(B,))
    b.node("CastToInt", "Cast", [b.input("CastToInt", [4, 3])], to=I64,
           out_types=(I64,))
    b.node("CastToBool", "Cast", [b.input("CastToBool", [4], "idx3", I64)],
           to=B, out_types=(B,))
    b.node("CastLike", "CastLike", [b.input("CastLike", [4], "idx5", I64),
                                    b.input("CastLike", [1])])
    b.node("Clip", "Clip", [b.input("Clip", [3, 4]),
                            b.const("Clip", -0.5, np.float32),
                            b.const("Clip", 0.7, np.float32)])
    b.node("Dropout", "Dropout", [b.input("Dropout", [3, 4])])
    b.node("MatMulBatched", "MatMul", [b.input("MatMulBatched", [2, 1, 3, 5]),
                                       b.input("MatMulBatched", [3, 5, 4])],
           tol=1e-4)
    b.node("MatMulWeight", "MatMul", [b.input("MatMulWeight", [2, 3, 5]),
                                      b.const("MatMulWeight",
                                              b.rng.standard_normal((5, 6)),
                                              np.float32)], tol=1e-4)
    b.node("MatMulVector", "MatMul", [b.input("MatMulVector", [5]),
                                      b.input("MatMulVector", [2, 5, 3])],
           tol=1e-4)
    b.node("Gemm", "Gemm", [b.input("Gemm", [5, 3]), b.input("Gemm", [4, 5]),
                            b.input("Gemm", [4])],
           transA=1, transB=1, alpha=0.5, beta=2.0, tol=1e-4)
    b.node("Softmax", "Softmax", [b.input("Softmax", [2, 3, 5])], axis=1)
    b.node("LogSoftmax", "LogSoftmax", [b.input("LogSoftmax", [3, 7])])
    b.node("LayerNorm", "LayerNormalization",
           [b.input("LayerNorm", [2, 3, 6]), b.input("LayerNorm", [6]),
            b.input("LayerNorm", [6])], tol=1e-4)
    b.node("LayerNorm2", "LayerNormalization",
           [b.input("LayerNorm2", [2, 3, 4]), b.input("LayerNorm2", [3, 4])],
           axis=-2, epsilon=1e-3, tol=1e-4)
    b.node("RMSNorm", "RMSNormalization", [b.input("RMSNorm", [2, 5, 6]),
                                           b.input("RMSNorm", [6])], tol=1e-4)
    for op in ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL1",
               "ReduceL2", "ReduceSumSquare", "ReduceLogSum",
               "ReduceLogSumExp"]:
        kind = "positive" if op == "ReduceLogSum" else "normal"
        b.node(op, op, [b.input(op, [2, 3, 5], kind),
                        b.const(op, [0, -1], np.int64)], keepdims=0, tol=1e-4)
        b.node(op + "All", op, [b.input(op + "All", [3, 4], kind)], tol=1e-4)
    b.node("Reshape", "Reshape", [b.input("Reshape", [2, 3, 4]),
                                  b.const("Reshape", [0, -1, 2], np.int64)])
    b.node("Transpose", "Transpose", [b.input("Transpose", [2, 3, 4])],
           perm=[2, 0, 1])
    b.node("Squeeze", "Squeeze", [b.input("Squeeze", [3, 1, 4, 1]),
                                  b.const("Squeeze", [1], np.int64)])
    b.node("Unsqueeze", "Unsqueeze", [b.input("Unsqueeze", [3, 4]),
                                      b.const("Unsqueeze", [0, -1], np.int64)])
    b.node("Flatten", "Flatten", [b.input("Flatten", [2, 3, 4])], axis=2)
    b.node("Concat", "Concat", [b.input("Concat", [2, 3]),
                                b.input("Concat", [2, 1]),
                                b.input("Concat", [2, 4])], axis=-1)
    b.node("Split", "Split", [b.input("Split", [2, 7]),
                              b.const("Split", [2, 5], np.int64)],
           n_out=2, axis=1)
    b.node("SplitEven", "Split", [b.input("SplitEven", [7, 3])], n_out=3,
           num_outputs=3)
    b.node("Slice", "Slice", [b.input("Slice", [5, 7]),
                              b.const("Slice", [1, -6], np.int64),
                              b.const("Slice", [-1, 1000], np.int64)])
    b.node("SliceReverse", "Slice",
           [b.input("SliceReverse", [5, 7]),
            b.const("SliceReverse", [-2], np.int64),
            b.const("SliceReverse", [-1000], np.int64),
            b.const("SliceReverse", [1], np.int64),
            b.const("SliceReverse", [-1], np.int64)])
    b.node("Gather", "Gather", [b.input("Gather", [9, 4]),
                                b.input("Gather", [2, 3], "idx9", I64)])
    b.node("GatherAxis1", "Gather", [b.input("GatherAxis1", [2, 5, 3]),
                                     b.input("GatherAxis1", [4], "idx5", I64)],
           axis=1)
    b.node("GatherScalar", "Gather", [b.input("GatherScalar", [2, 5, 3]),
                                      b.const("GatherScalar", -1, np.int64)],
           axis=1)
    b.node("GatherConstIdx", "Gather",
           [b.input("GatherConstIdx", [6, 2]),
            b.const("GatherConstIdx", [4, 0, 4], np.int64)])
    b.node("GatherElements", "GatherElements",
           [b.input("GatherElements", [3, 4]),
            b.const("GatherElements", [[1, 0], [3, 3], [2, 1]], np.int64)],
           axis=1)
    b.node("GatherND", "GatherND",
           [b.input("GatherND", [2, 3, 4]),
            b.const("GatherND", [[[1]], [[2]]], np.int64)], batch_dims=1)
    b.node("Expand", "Expand", [b.input("Expand", [3, 1]),
                                b.const("Expand", [2, 3, 4], np.int64)])
    b.node("Tile", "Tile", [b.input("Tile", [2, 3]),
                            b.const("Tile", [2, 2], np.int64)])
    b.node("Trilu", "Trilu", [b.input("Trilu", [2, 4, 5]),
                              b.const("Trilu", 1, np.int64)], upper=0)
    b.node("CumSum", "CumSum", [b.input("CumSum", [3, 6]),
                                b.const("CumSum", 1, np.int64)],
           exclusive=1, reverse=1)
    b.node("CumSumIds", "CumSum", [b.input("CumSumIds", [2, 5], "idx2", I64),
                                   b.const("CumSumIds", 1, np.int64)],
           out_types=(I64,))
    # Folded on the host: shapes and constants through the shape ops.
    shape = b.node("Shape", "Shape", [b.input("Shape", [3, 5, 2])],
                   out_types=(I64,), start=1)[0]
    b.node("ConstantOfShape", "ConstantOfShape", [shape],
           value=numpy_helper.from_array(np.array([1.5], np.float32)))
    b.node("Range", "Range", [b.const("Range", 2, np.int64),
                              b.const("Range", 11, np.int64),
                              b.const("Range", 3, np.int64)],
           out_types=(I64,))
    b.node("Size", "Size", [b.input("Size", [3, 5])], out_types=(I64,))
    b.node("Constant", "Constant", [], value_floats=[1.0, -2.5])
    conv_cases(b)
    scatter_cases(b)
    attention_cases(b)


def conv_cases(b):
    def conv(case, x, w, bias=True, weight_const=False, **attrs):
        ins = [b.input(case, x),
               b.const(case, b.rng.standard_normal(w), np.float32)
               if weight_const else b.input(case, w)]
        if bias:
            ins.append(b.input(case, [w[0]]))
        b.node(case, "Conv", ins, tol=1e-4, **attrs)
    conv("Conv", [2, 3, 7, 9], [4, 3, 3, 2], pads=[1, 0, 2, 1],
         strides=[2, 3], dilations=[1, 2])
    conv("ConvSameUpper", [1, 2, 6, 5], [3, 2, 3, 3], bias=False,
         auto_pad="SAME_UPPER", strides=[2, 2])
    conv("ConvSameLower", [1, 2, 5, 4], [2, 2, 2, 2], auto_pad="SAME_LOWER")
    conv("ConvValid", [2, 2, 8, 7], [3, 2, 3, 2], auto_pad="VALID",
         strides=[2, 2], weight_const=True)
    conv("ConvDepthwise", [2, 4, 6, 7], [8, 1, 3, 3], group=4,
         pads=[1, 1, 1, 1])
    conv("ConvGroups", [1, 6, 5, 5], [4, 3, 2, 2], group=2, bias=False)
    conv("Conv1D", [2, 3, 11], [5, 3, 4], strides=[2], pads=[2, 1],
         dilations=[2])
    conv("Conv1DDepthwise", [1, 4, 9], [4, 1, 3], group=4, pads=[1, 1])
    conv("Conv3D", [1, 2, 4, 5, 6], [3, 2, 2, 3, 2], strides=[1, 2, 1],
         pads=[0, 1, 1, 1, 0, 0])
    conv("Conv3DGroups", [1, 4, 3, 4, 3], [2, 2, 2, 2, 2], group=2)
    # Kernel == stride (patch embeddings) and 1x1: a matmul; the cropped
    # tail of a size the stride does not divide.
    conv("ConvPatch", [2, 3, 16, 24], [5, 3, 8, 8], strides=[8, 8],
         weight_const=True)
    conv("ConvPatchTail", [1, 3, 17, 19], [4, 3, 4, 4], strides=[4, 4],
         kernel_shape=[4, 4])
    conv("Conv1x1", [2, 5, 3, 4], [6, 5, 1, 1], bias=False)
    conv("ConvPatch1D", [2, 3, 12], [4, 3, 3], strides=[3])
    # Kernels of more than 64 positions: TOSA's convolutions.
    conv("ConvLarge", [1, 2, 12, 11], [3, 2, 9, 8], pads=[4, 3, 4, 4],
         strides=[2, 1])
    conv("Conv1DLarge", [2, 2, 80], [3, 2, 65], pads=[3, 0], strides=[3])


def scatter_cases(b):
    def scatter(case, data, indices, upd, dtype=F, kind="normal",
                runtime=False, **attrs):
        """Indices as a constant, or (runtime) an input fed these values."""
        x = b.input(case, data, kind, dtype)
        if runtime:
            idx = b.input(case, list(np.shape(indices)), "idx1", I64)
            b.feeds[idx] = np.array(indices, np.int64)
        else:
            idx = b.const(case, indices, np.int64)
        b.node(case, "ScatterND", [x, idx, b.input(case, upd, kind, dtype)],
               out_types=(dtype,), **attrs)
    scatter("ScatterND", [4, 5, 3], [[1], [3]], [2, 5, 3])
    scatter("ScatterND2", [4, 5, 3], [[0, 1], [3, -1], [2, 2]], [3, 3])
    scatter("ScatterNDFull", [3, 2], [[2], [0], [1]], [3, 2])
    for red in ["add", "mul", "max", "min"]:
        scatter("ScatterND" + red, [4, 5, 3], [[1], [-3], [2], [1]],
                [4, 5, 3], reduction=red)
        scatter("ScatterNDRun" + red, [4, 3], [[2], [0], [2]], [3, 3],
                runtime=True, reduction=red)
    scatter("ScatterNDRun", [5, 4, 2], [[3, 1], [-1, 0], [0, 3]], [3, 2],
            runtime=True)
    scatter("ScatterNDInt", [6, 2], [[2], [4]], [2, 2], I64, "idx9")
    scatter("ScatterNDIntRun", [6], [[5], [-6]], [2], I64, "idx9",
            runtime=True, reduction="add")
    b.node("ScatterNDFolded", "ScatterND",
           [b.const("ScatterNDFolded", [1.5, 2.0, -1.0], np.float32),
            b.const("ScatterNDFolded", [[0], [2], [0]], np.int64),
            b.const("ScatterNDFolded", [4.0, 0.5, 3.0], np.float32)],
           reduction="mul")



def attention(b, case, q, k, v, mask=None, past=None, nonpad=None, n_out=1,
              **attrs):
    """One Attention node; a bool mask keeps key 0 visible to every query,
    nonpad_kv_seqlen is fed `nonpad`."""
    ins = [b.input(case, q), b.input(case, k), b.input(case, v)]
    if mask:
        shape, dtype = mask
        ins.append(b.input(case, shape, "bool" if dtype == B else "normal",
                           dtype))
        if dtype == B:
            b.feeds[ins[-1]][..., 0] = True
    if past:
        ins += [""] * (4 - len(ins))
        ins += [b.input(case, past[0]), b.input(case, past[1])]
    if nonpad:
        ins += [""] * (6 - len(ins))
        ins.append(b.input(case, [len(nonpad)], "idx1", I64))
        b.feeds[ins[-1]] = np.array(nonpad, np.int64)
    b.node(case, "Attention", ins, n_out=n_out, tol=1e-4, **attrs)


def attention_cases(b):
    attention(b, "Attn4D", [2, 3, 5, 8], [2, 3, 7, 8], [2, 3, 7, 6],
              mask=([5, 7], F))
    attention(b, "AttnCausal", [1, 2, 6, 4], [1, 2, 6, 4], [1, 2, 6, 4],
              is_causal=1)
    attention(b, "AttnGqa3D", [2, 5, 18], [2, 5, 6], [2, 5, 4], is_causal=1,
              q_num_heads=6, kv_num_heads=2, scale=0.37)
    attention(b, "AttnSoftcapBool", [2, 2, 3, 5], [2, 2, 9, 5], [2, 2, 9, 3],
              mask=([2, 1, 3, 9], B), softcap=1.5)
    attention(b, "AttnPast", [1, 4, 3, 8], [1, 2, 3, 8], [1, 2, 3, 5],
              past=([1, 2, 4, 8], [1, 2, 4, 5]), n_out=3, is_causal=1)
    for mode in range(4):
        attention(b, f"AttnQk{mode}", [1, 2, 3, 4], [1, 2, 5, 4],
                  [1, 2, 5, 3], mask=([2, 3, 5], F), n_out=4, softcap=2.0,
                  qk_matmul_output_mode=mode)


def cases_24(b):
    attention(b, "AttnNonpadCausal", [2, 3, 5, 8], [2, 1, 9, 8],
              [2, 1, 9, 6], nonpad=[6, 9], is_causal=1)
    attention(b, "AttnNonpadMask", [2, 2, 4, 8], [2, 2, 9, 8], [2, 2, 9, 6],
              mask=([4, 9], F), nonpad=[3, 7])


def cases_11(b):
    b.node("Softmax11", "Softmax", [b.input("Softmax11", [2, 3, 4])], axis=1)
    b.node("LogSoftmax11", "LogSoftmax", [b.input("LogSoftmax11", [2, 3, 4])],
           axis=1)


def check(model, b, args, tag):
    import onnxruntime as ort
    path = os.path.join(args.work, f"ops{tag}.onnx")
    onnx.save(model, path)
    expected = ort.InferenceSession(path, providers=["CPUExecutionProvider"]
                                    ).run(None, b.feeds)
    lib = os.path.join(args.work, f"ops{tag}.so")
    r = subprocess.run([os.path.join(args.bin, "tfc-compile"), path, "-o",
                        lib] + (["--no-fusion"] if args.no_fusion else []),
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(r.stderr)
    # tfc orders its inputs as the file does.
    names = [o.name for o in model.graph.output]
    results, error = tfc_run.run(
        args.bin, lib, [b.feeds[i.name] for i in model.graph.input],
        len(names), args.work, weights=path if model.graph.initializer else None,
        stem=f"ops{tag}")
    if error:
        sys.exit(error)
    bad = []
    for name, got, ref in zip(names, results, expected):
        if got.shape != ref.shape:
            bad.append(f"{name}: shape {got.shape}, ONNX Runtime {ref.shape}")
        elif ref.dtype.kind in "biu":
            if not np.array_equal(got, ref):
                bad.append(f"{name}: differs: {got} vs {ref}")
        elif not np.array_equal(np.isnan(got), np.isnan(ref)):
            bad.append(f"{name}: NaN in other places")
        else:
            keep = ~np.isnan(ref)
            got, ref = got[keep], ref[keep]
            err = float(np.abs(got.astype(np.float64) - ref).max(initial=0))
            scale = max(float(np.abs(ref).max(initial=0)), 1.0)
            if not err <= b.tolerance[name] * scale:
                bad.append(f"{name}: max error {err:.3g} (scale {scale:.3g})")
    print(f"opset {tag}: {len(names)} outputs, {len(bad)} wrong")
    for line in bad:
        print("  " + line)
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--no-fusion", action="store_true",
                    help="compile the unfused graphs")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    seed = args.seed if args.seed is not None else int.from_bytes(
        os.urandom(4), "little")
    rng = np.random.default_rng(seed)
    bad = []
    for opset, cases in ((23, cases_23), (24, cases_24),
                         (11, cases_11)):
        b = Builder(rng)
        cases(b)
        bad += check(b.model(opset), b, args, str(opset))
    if bad:
        sys.exit("\n".join(bad) + f"\n(seed {seed})")


if __name__ == "__main__":
    main()
