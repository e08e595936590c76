"""Writes copies of minilm.onnx that write_data.py must refuse, into DIR:
renamed.onnx (an external tensor the checkpoint does not hold), shape.onnx,
dtype.onnx and length.onnx (a transposed weight of another shape, element
type or byte length than the checkpoint's).

  python3 bad_graph.py GRAPH.onnx DIR
"""

import os
import sys

import onnx


def main():
    graph, out = sys.argv[1:]
    os.makedirs(out, exist_ok=True)

    def write(name, change):
        model = onnx.load(graph, load_external_data=False)
        tensors = {t.name: t for t in model.graph.initializer}
        change(tensors)
        onnx.save(model, os.path.join(out, name))

    def renamed(t):
        t["model.embeddings.word_embeddings.weight"].name = (
            "model.embeddings.no_such.weight")

    def shape(t):
        t["val_95"].dims[1] = 385

    def dtype(t):
        t["val_95"].data_type = onnx.TensorProto.FLOAT16

    def length(t):
        for e in t["val_95"].external_data:
            if e.key == "length":
                e.value = str(int(e.value) + 4)

    for name, change in (("renamed.onnx", renamed), ("shape.onnx", shape),
                         ("dtype.onnx", dtype), ("length.onnx", length)):
        write(name, change)


if __name__ == "__main__":
    main()
