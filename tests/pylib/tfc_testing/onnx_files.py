"""ONNX files written by hand (needs onnx): a graph whose float
initializers lie in an external data file at offsets the test chooses."""

import os

from onnx import TensorProto, helper


def write_external(path, nodes, inputs, outputs, weights, place,
                   initializers=(), name="graph"):
    """path and path.data: an ONNX model (opset 17) of `nodes`, `inputs`
    and `outputs` (ValueInfoProtos), each float32 array of `weights` (name
    -> array) an initializer whose bytes lie in path.data at offset
    place(name, end), an offset at or past `end` (the bytes so far), and
    `initializers` (TensorProtos) inside the model. Returns {name:
    offset}."""
    data_name = os.path.basename(path) + ".data"
    offsets, blob, tensors = {}, bytearray(), []
    for key_name, value in weights.items():
        at = place(key_name, len(blob))
        blob += bytes(at - len(blob)) + value.tobytes()
        offsets[key_name] = at
        t = TensorProto(name=key_name, data_type=TensorProto.FLOAT,
                        dims=value.shape)
        t.data_location = TensorProto.EXTERNAL
        for key, val in (("location", data_name), ("offset", str(at)),
                         ("length", str(value.nbytes))):
            t.external_data.add(key=key, value=val)
        tensors.append(t)
    graph = helper.make_graph(nodes, name, inputs, outputs,
                              tensors + list(initializers))
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", 17)])
    with open(path + ".data", "wb") as f:
        f.write(blob)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return offsets
