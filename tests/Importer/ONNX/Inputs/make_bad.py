"""Writes the malformed ONNX files of errors.test into a folder."""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model(nodes, inputs, outputs, inits=(), opset=17, ir=8):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir
    return m


def add_model(**kw):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    w = numpy_helper.from_array(np.arange(4, dtype=np.float32), "w")
    return model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                 [x], [y], [w], **kw)


def main(out):
    os.makedirs(out, exist_ok=True)
    save = lambda m, name: onnx.save(m, os.path.join(out, name))
    with open(os.path.join(out, "not-protobuf.onnx"), "w") as f:
        f.write("this is not a model\n")
    good = add_model().SerializeToString()
    with open(os.path.join(out, "truncated.onnx"), "wb") as f:
        f.write(good[: len(good) - 7])
    save(add_model(ir=99), "ir-version.onnx")
    save(add_model(opset=99), "opset.onnx")

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    save(model([helper.make_node("Frobnicate", ["x"], ["y"], name="frob")],
               [x], [y]), "unsupported-op.onnx")
    custom = model([helper.make_node("FusedGelu", ["x"], ["y"], name="fg",
                                     domain="com.microsoft")], [x], [y])
    custom.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    save(custom, "custom-domain.onnx")
    save(model([helper.make_node("Add", ["x", "bias"], ["y"], name="add")],
               [x], [y]), "missing-initializer.onnx")
    # Input counts from the operator's schema: too few, too many.
    save(model([helper.make_node("Add", ["x"], ["y"], name="add")], [x], [y]),
         "inputs-few.onnx")
    save(model([helper.make_node("Relu", ["x", "x"], ["y"], name="relu")],
               [x], [y]), "inputs-many.onnx")

    # External data: a weight of 32 floats in w.bin.
    w = numpy_helper.from_array(np.ones((8, 4), np.float32), "w")
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "w.bin"), ("offset", "0"),
                       ("length", "128")):
        w.external_data.add(key=key, value=value)
    w.ClearField("raw_data")
    xs = helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 4])
    ys = helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 4])
    ext = model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                [xs], [ys], [w])
    os.makedirs(os.path.join(out, "ext-missing"), exist_ok=True)
    onnx.save(ext, os.path.join(out, "ext-missing", "m.onnx"))
    os.makedirs(os.path.join(out, "ext-short"), exist_ok=True)
    onnx.save(ext, os.path.join(out, "ext-short", "m.onnx"))
    with open(os.path.join(out, "ext-short", "w.bin"), "wb") as f:
        f.write(b"\0" * 64)

    shapeless = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
    save(model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
               [shapeless], [y]), "no-shape.onnx")
    seq = helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                        ["batch", "sequence"])
    save(model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
               [seq], [y]), "dynamic.onnx")
    # Shape with start > end: an output of no elements.
    empty = helper.make_tensor_value_info("y", TensorProto.INT64, [0])
    save(model([helper.make_node("Shape", ["x"], ["y"], name="shape",
                                 start=2, end=1)], [xs], [empty], opset=15),
         "empty-output.onnx")
    save(add_model(), "good.onnx")
    twice = add_model()
    twice.graph.initializer.append(twice.graph.initializer[0])
    save(twice, "initializer-twice.onnx")
    huge = add_model()
    huge.graph.initializer[0].ClearField("dims")
    huge.graph.initializer[0].dims.extend([1 << 31, 1 << 31])
    save(huge, "initializer-huge.onnx")

    # A weight of 32 floats inline, and two patched copies: the folded
    # constant w's values changed in place; the weight's name changed
    # in place (another layout as far as the runtime can tell).
    big = numpy_helper.from_array(
        np.arange(32, dtype=np.float32).reshape(8, 4), "v")
    m = model([helper.make_node("Add", ["x", "w"], ["t"], name="add"),
               helper.make_node("Mul", ["t", "v"], ["y"], name="mul")],
              [xs], [ys], [numpy_helper.from_array(
                  np.arange(4, dtype=np.float32) + 0.5, "w"), big])
    data = m.SerializeToString()
    with open(os.path.join(out, "weights.onnx"), "wb") as f:
        f.write(data)
    w_bytes = (np.arange(4, dtype=np.float32) + 0.5).tobytes()
    assert data.count(w_bytes) == 1
    changed = data.replace(w_bytes, np.full(4, 7, np.float32).tobytes())
    with open(os.path.join(out, "weights-constant-changed.onnx"), "wb") as f:
        f.write(changed)
    renamed = data.replace(b"\x42\x01v\x4a", b"\x42\x01u\x4a")
    assert renamed != data
    with open(os.path.join(out, "weights-renamed.onnx"), "wb") as f:
        f.write(renamed)
    regraphed = data.replace(b"Mul", b"Sub")
    assert regraphed != data
    with open(os.path.join(out, "weights-node-changed.onnx"), "wb") as f:
        f.write(regraphed)
    operator_versions(save)
    attention_errors(save)

    x84 = np.full((8, 4), 2, np.float32)
    np.save(os.path.join(out, "x84.npy"), x84)
    np.save(os.path.join(out, "expected84.npy"),
            (x84 + np.arange(4, dtype=np.float32) + 0.5) *
            np.arange(32, dtype=np.float32).reshape(8, 4))


def operator_versions(save):
    """Versions tfc does not translate, an operator its opset predates and
    a new attribute's value tfc does not compute."""
    q = helper.make_tensor_value_info("q", TensorProto.FLOAT, [1, 2, 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    att = helper.make_node("Attention", ["q", "q", "q"], ["y"], name="att")
    save(model([att], [q], [y], opset=25, ir=13), "op-version.onnx")
    save(model([att], [q], [y], opset=22, ir=10), "op-before.onnx")
    r = helper.make_tensor_value_info("r", TensorProto.FLOAT16, None)
    inits = [numpy_helper.from_array(np.array(v, np.float16), n)
             for n, v in (("start", 1), ("limit", 9), ("delta", 2))]
    save(model([helper.make_node("Range", ["start", "limit", "delta"], ["r"],
                                 name="range", stash_type=10)],
               [], [r], inits, opset=27, ir=13), "range-stash.onnx")


# Attention nodes tfc refuses: name -> (Q, K, V shapes, attn_mask shape
# and type or None, extra inputs, attributes).
F, B = TensorProto.FLOAT, TensorProto.BOOL
ATTENTION = {
    "heads-missing": ([1, 3, 8], [1, 3, 8], [1, 3, 8], None, {}),
    "heads-4d": ([1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4], None,
                 {"q_num_heads": 3}),
    "hidden": ([1, 3, 8], [1, 3, 8], [1, 3, 8], None,
               {"q_num_heads": 3, "kv_num_heads": 3}),
    "qk-head-size": ([1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 3, 4], None, {}),
    "groups": ([1, 3, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4], None, {}),
    "ranks": ([1, 2, 3, 4], [1, 3, 8], [1, 3, 8], None, {}),
    "kv-length": ([1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 5, 4], None, {}),
    "mask-type": ([1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4],
                  ([3, 3], TensorProto.INT32), {}),
    "mask-keys": ([1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4], ([3, 5], F), {}),
    "mode": ([1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4], None,
             {"qk_matmul_output_mode": 4}),
    "causal": ([1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4], None,
               {"is_causal": 2}),
    "precision": ([1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4], None,
                  {"softmax_precision": TensorProto.DOUBLE}),
    "past-alone": ([1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4], None, {}),
    "past-shape": ([1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4], None, {}),
    "nonpad-past": ([1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4], None, {}),
    "nonpad-shape": ([2, 2, 3, 4], [2, 2, 3, 4], [2, 2, 3, 4], None, {}),
    "missing-v": ([1, 2, 3, 4], [1, 2, 3, 4], None, None, {}),
    "int": ([1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4], None, {}),
    "types": ([1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4], None, {}),
    "batch": ([1, 2, 3, 4], [2, 2, 3, 4], [2, 2, 3, 4], None, {}),
    "v-heads": ([1, 2, 3, 4], [1, 2, 3, 4], [1, 1, 3, 4], None, {}),
    "mask-rank": ([1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4],
                  ([1, 1, 1, 3, 3], F), {}),
}


def attention_errors(save):
    for name, (q, k, v, mask, attrs) in ATTENTION.items():
        types = {"int": TensorProto.INT32, "types": TensorProto.FLOAT16}
        inputs = [helper.make_tensor_value_info(
                      n, types.get(name, F) if n != "k" else F, s)
                  for n, s in (("q", q), ("k", k), ("v", v)) if s]
        ins = ["q", "k", "v" if v else ""]
        if mask:
            inputs.append(helper.make_tensor_value_info("m", mask[1],
                                                        mask[0]))
            ins.append("m")
        past = [1, 2, 2, 4] if name != "past-shape" else [1, 2, 2, 5]
        if name in ("past-alone", "past-shape", "nonpad-past"):
            inputs.append(helper.make_tensor_value_info("pk", F, past))
            ins += ["", "pk", "" if name == "past-alone" else "pk"]
        if name.startswith("nonpad"):
            n = [3] if name == "nonpad-shape" else [1]
            inputs.append(helper.make_tensor_value_info("n", TensorProto.INT64,
                                                        n))
            ins += [""] * (6 - len(ins)) + ["n"]
        y = helper.make_tensor_value_info("y", F, None)
        node = helper.make_node("Attention", ins, ["y"], name="att", **attrs)
        save(model([node], inputs, [y], opset=24, ir=10),
             f"attention-{name}.onnx")


if __name__ == "__main__":
    main(sys.argv[1])
