"""Exports all-MiniLM-L6-v2 (scripts/install-model.sh) to minilm.onnx with
PyTorch's dynamo exporter, its weights as external data (minilm.onnx.data,
not kept: write_data.py writes it from the installed model.safetensors).

  /work/venv-onnx/bin/python export.py MODEL_DIR [--out DIR]

The graph is what `tfc-compile --hf MODEL_DIR --output hidden` builds:
BertModel's last_hidden_state from input_ids and attention_mask [batch,
sequence] (token types all zero, the model's own buffer). The nodes' and
values' metadata (PyTorch's names and stack traces) are left out of the
file. It prints the external tensors that are not a checkpoint tensor under
its own name (the exporter transposes the Linear weights into constants of
its own names) as write_data.py's table records them. Needs torch and
transformers; the tests need neither.
"""

import argparse
import os

import numpy as np
import onnx

import torch
import transformers


class HiddenState(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids,
                          attention_mask=attention_mask).last_hidden_state


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir")
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    args = ap.parse_args()
    bert = transformers.BertModel.from_pretrained(
        args.model_dir, add_pooling_layer=False, attn_implementation="eager")
    model = HiddenState(bert.eval())
    ids = torch.randint(0, 1000, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.int64)
    mask[1, 6:] = 0
    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
    path = os.path.join(args.out, "minilm.onnx")
    program = torch.onnx.export(
        model, (ids, mask), dynamo=True,
        input_names=["input_ids", "attention_mask"],
        output_names=["last_hidden_state"],
        dynamic_shapes={"input_ids": {0: batch, 1: sequence},
                        "attention_mask": {0: batch, 1: sequence}})
    program.save(path, external_data=True)
    graph = onnx.load(path, load_external_data=False)
    for node in graph.graph.node:
        del node.metadata_props[:]
        node.doc_string = ""
    for values in (graph.graph.input, graph.graph.output,
                   graph.graph.value_info):
        for v in values:
            del v.metadata_props[:]
    del graph.graph.value_info[:]
    del graph.metadata_props[:]
    graph.graph.doc_string = ""
    onnx.save(graph, path)
    print(path, os.path.getsize(path))
    # Which checkpoint tensor each renamed one holds.
    state = {k: v.numpy() for k, v in bert.state_dict().items()}
    folder = args.out
    for t in graph.graph.initializer:
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        name = t.name.removeprefix("model.")
        if name in state:
            continue
        where = {e.key: e.value for e in t.external_data}
        with open(os.path.join(folder, where["location"]), "rb") as f:
            f.seek(int(where.get("offset", 0)))
            raw = f.read(int(where["length"]))
        value = np.frombuffer(raw, onnx.helper.tensor_dtype_to_np_dtype(
            t.data_type)).reshape(t.dims)
        found = [(k, "transpose") for k, v in state.items()
                 if v.ndim == 2 and v.T.shape == value.shape and
                 np.array_equal(v.T, value)]
        if not found and not value.any():
            found = [(None, "zeros")]
        print(f'    "{t.name}": {found},')


if __name__ == "__main__":
    main()
