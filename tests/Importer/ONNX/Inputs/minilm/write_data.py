"""Writes minilm.onnx's external data file from all-MiniLM-L6-v2's
model.safetensors (scripts/install-model.sh), so that the 90 MB the
exporter wrote need not be kept: export.py wrote the graph, this writes the
bytes it refers to.

  python3 write_data.py GRAPH.onnx MODEL_DIR

writes GRAPH's external data file (minilm.onnx.data) next to GRAPH. Each
external tensor is the checkpoint tensor of its name without the exporter's
"model." prefix, or the one RENAMED gives: the exporter transposed each
Linear weight into a constant of its own name, and wrote the token types
(a buffer the checkpoint does not hold) as zeros. Each is checked for
dtype, shape and byte length against the graph; a mismatch is one line
naming the tensor, exit status 1. Needs numpy and onnx only.
"""

import os
import sys

import numpy as np
import onnx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "..", "pylib"))
from tfc_testing import safetensors_file  # noqa: E402

TRANSPOSED = "transposed"
ZEROS = "zeros"

# External tensor -> (checkpoint tensor, how the exporter wrote it).
RENAMED = {
    "expand": (None, ZEROS),
    "val_95": ("encoder.layer.0.attention.self.query.weight", TRANSPOSED),
    "val_103": ("encoder.layer.0.attention.self.key.weight", TRANSPOSED),
    "val_111": ("encoder.layer.0.attention.self.value.weight", TRANSPOSED),
    "val_125": ("encoder.layer.0.attention.output.dense.weight", TRANSPOSED),
    "val_129": ("encoder.layer.0.intermediate.dense.weight", TRANSPOSED),
    "val_131": ("encoder.layer.0.output.dense.weight", TRANSPOSED),
    "val_135": ("encoder.layer.1.attention.self.query.weight", TRANSPOSED),
    "val_143": ("encoder.layer.1.attention.self.key.weight", TRANSPOSED),
    "val_151": ("encoder.layer.1.attention.self.value.weight", TRANSPOSED),
    "val_164": ("encoder.layer.1.attention.output.dense.weight", TRANSPOSED),
    "val_168": ("encoder.layer.1.intermediate.dense.weight", TRANSPOSED),
    "val_170": ("encoder.layer.1.output.dense.weight", TRANSPOSED),
    "val_174": ("encoder.layer.2.attention.self.query.weight", TRANSPOSED),
    "val_182": ("encoder.layer.2.attention.self.key.weight", TRANSPOSED),
    "val_190": ("encoder.layer.2.attention.self.value.weight", TRANSPOSED),
    "val_203": ("encoder.layer.2.attention.output.dense.weight", TRANSPOSED),
    "val_207": ("encoder.layer.2.intermediate.dense.weight", TRANSPOSED),
    "val_209": ("encoder.layer.2.output.dense.weight", TRANSPOSED),
    "val_213": ("encoder.layer.3.attention.self.query.weight", TRANSPOSED),
    "val_221": ("encoder.layer.3.attention.self.key.weight", TRANSPOSED),
    "val_229": ("encoder.layer.3.attention.self.value.weight", TRANSPOSED),
    "val_242": ("encoder.layer.3.attention.output.dense.weight", TRANSPOSED),
    "val_246": ("encoder.layer.3.intermediate.dense.weight", TRANSPOSED),
    "val_248": ("encoder.layer.3.output.dense.weight", TRANSPOSED),
    "val_252": ("encoder.layer.4.attention.self.query.weight", TRANSPOSED),
    "val_260": ("encoder.layer.4.attention.self.key.weight", TRANSPOSED),
    "val_268": ("encoder.layer.4.attention.self.value.weight", TRANSPOSED),
    "val_281": ("encoder.layer.4.attention.output.dense.weight", TRANSPOSED),
    "val_285": ("encoder.layer.4.intermediate.dense.weight", TRANSPOSED),
    "val_287": ("encoder.layer.4.output.dense.weight", TRANSPOSED),
    "val_291": ("encoder.layer.5.attention.self.query.weight", TRANSPOSED),
    "val_299": ("encoder.layer.5.attention.self.key.weight", TRANSPOSED),
    "val_307": ("encoder.layer.5.attention.self.value.weight", TRANSPOSED),
    "val_320": ("encoder.layer.5.attention.output.dense.weight", TRANSPOSED),
    "val_324": ("encoder.layer.5.intermediate.dense.weight", TRANSPOSED),
    "val_326": ("encoder.layer.5.output.dense.weight", TRANSPOSED),
}


def fail(message):
    sys.exit("write_data.py: " + message)


def source(name, dims, checkpoint):
    """The bytes of external tensor `name` of shape `dims`, and what they
    were made from."""
    what, how = RENAMED.get(name, (name.removeprefix("model."), None))
    if how == ZEROS:
        return None, "zeros"
    if what not in checkpoint:
        fail(f"tensor '{name}': the checkpoint has no tensor '{what}'")
    value = checkpoint[what]
    if how == TRANSPOSED:
        if value.ndim != 2:
            fail(f"tensor '{name}': '{what}' has rank {value.ndim}, not 2")
        value = value.T
    return np.ascontiguousarray(value), f"'{what}'"


def main():
    if len(sys.argv) != 3:
        fail("usage: write_data.py GRAPH.onnx MODEL_DIR")
    graph_path, model_dir = sys.argv[1:]
    graph = onnx.load(graph_path, load_external_data=False)
    checkpoint = safetensors_file.read(model_dir)
    files = {}
    for t in graph.graph.initializer:
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        where = {e.key: e.value for e in t.external_data}
        dims = tuple(t.dims)
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.data_type))
        length = int(where["length"])
        value, what = source(t.name, dims, checkpoint)
        if value is None:
            value = np.zeros(dims, dtype)
        if value.dtype != dtype:
            fail(f"tensor '{t.name}': {what} is {value.dtype}, the graph "
                 f"says {dtype}")
        if value.shape != dims:
            fail(f"tensor '{t.name}': {what} has shape {list(value.shape)}, "
                 f"the graph says {list(dims)}")
        if value.nbytes != length:
            fail(f"tensor '{t.name}': {what} has {value.nbytes} bytes, the "
                 f"graph records {length}")
        files.setdefault(where["location"], []).append(
            (int(where.get("offset", 0)), value.tobytes()))
    folder = os.path.dirname(os.path.abspath(graph_path))
    for location, pieces in files.items():
        with open(os.path.join(folder, location), "wb") as f:
            for offset, raw in sorted(pieces):
                f.seek(offset)
                f.write(raw)
        print(f"{location}: {len(pieces)} tensors")


if __name__ == "__main__":
    main()
