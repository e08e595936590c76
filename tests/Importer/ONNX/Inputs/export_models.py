"""Exports the small random-weight ONNX models the ONNX importer's tests use.

Run by scripts/onnx-fixtures.sh (it needs PyTorch, transformers and
onnxscript, which the tests themselves do not): every model with both of
PyTorch's exporters, the TorchScript one (opset 17) and the dynamo one
(opset 18 and newer), into models/<name>-<exporter>.onnx (the dynamo
exporter writes larger tensors to an external <file>.data, which the tests
thereby cover). Weights are drawn at random (biases and norms included, so
that no two initializers are alike and a mixed-up weight shows).
"""

import argparse
import math
import os

import torch

VOCAB = 64
HIDDEN = 32
HEADS = 4


def randomize(module, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return module.eval()


class HiddenState(torch.nn.Module):
    """A transformers model called with keyword inputs, returning the last
    hidden state."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask)
        return out.last_hidden_state


class SeedEncoderLayer(torch.nn.Module):
    """The encoder of "Attention Is All You Need" as its readers write it in
    plain PyTorch: sinusoidal positions, heads split by view/transpose,
    scores / sqrt(d_k), masked_fill(mask == 0, -1e9), post-LayerNorm."""

    def __init__(self, layers=2, d_model=HIDDEN, heads=HEADS, d_ff=48):
        super().__init__()
        self.heads, self.d_k = heads, d_model // heads
        self.embed = torch.nn.Embedding(VOCAB, d_model)
        pe = torch.zeros(64, d_model)
        pos = torch.arange(64).unsqueeze(1).float()
        div = torch.exp(torch.arange(0, d_model, 2).float() *
                        (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer("pe", pe)
        self.layers = torch.nn.ModuleList()
        for _ in range(layers):
            self.layers.append(torch.nn.ModuleDict({
                "q": torch.nn.Linear(d_model, d_model),
                "k": torch.nn.Linear(d_model, d_model),
                "v": torch.nn.Linear(d_model, d_model),
                "o": torch.nn.Linear(d_model, d_model),
                "ln1": torch.nn.LayerNorm(d_model),
                "ff1": torch.nn.Linear(d_model, d_ff),
                "ff2": torch.nn.Linear(d_ff, d_model),
                "ln2": torch.nn.LayerNorm(d_model),
            }))

    def attention(self, layer, x, mask):
        b, s, _ = x.shape
        split = lambda t: t.view(b, s, self.heads, self.d_k).transpose(1, 2)
        q, k, v = split(layer["q"](x)), split(layer["k"](x)), split(layer["v"](x))
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.d_k)
        scores = scores.masked_fill(mask == 0, -1e9)
        p = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(p, v).transpose(1, 2).contiguous().view(b, s, -1)
        return layer["o"](ctx)

    def forward(self, input_ids, attention_mask):
        s = input_ids.shape[1]
        x = self.embed(input_ids) * math.sqrt(HIDDEN) + self.pe[:s]
        mask = attention_mask[:, None, None, :]
        for layer in self.layers:
            x = layer["ln1"](x + self.attention(layer, x, mask))
            x = layer["ln2"](x + layer["ff2"](torch.relu(layer["ff1"](x))))
        return x


def transformers_model(name):
    import transformers as t
    if name == "bert":
        cfg = t.BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN,
                           num_hidden_layers=2, num_attention_heads=HEADS,
                           intermediate_size=48, max_position_embeddings=64)
        return t.BertModel(cfg, add_pooling_layer=False)
    if name == "gpt2":
        cfg = t.GPT2Config(vocab_size=VOCAB, n_embd=HIDDEN, n_layer=2,
                           n_head=HEADS, n_positions=64)
        return t.GPT2Model(cfg)
    if name == "llama":
        cfg = t.LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN,
                            num_hidden_layers=2, num_attention_heads=HEADS,
                            num_key_value_heads=2, intermediate_size=48,
                            max_position_embeddings=64)
        return t.LlamaModel(cfg)
    raise ValueError(name)


MODELS = {
    "bert": lambda: HiddenState(transformers_model("bert")),
    "gpt2": lambda: HiddenState(transformers_model("gpt2")),
    "llama": lambda: HiddenState(transformers_model("llama")),
    "seed": SeedEncoderLayer,
}


def export(name, model, exporter, out):
    ids = torch.randint(0, VOCAB, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.int64)
    mask[1, 6:] = 0
    dims = {0: "batch", 1: "sequence"}
    path = os.path.join(out, f"{name}-{exporter}.onnx")
    kw = dict(input_names=["input_ids", "attention_mask"],
              output_names=["last_hidden_state"])
    if exporter == "dynamo":
        batch, seq = torch.export.Dim("batch"), torch.export.Dim("sequence")
        kw["dynamic_shapes"] = {"input_ids": {0: batch, 1: seq},
                                "attention_mask": {0: batch, 1: seq}}
        torch.onnx.export(model, (ids, mask), path, dynamo=True, **kw)
    else:
        kw["dynamic_axes"] = {"input_ids": dims, "attention_mask": dims}
        torch.onnx.export(model, (ids, mask), path, dynamo=False,
                          opset_version=17, **kw)
    print(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "models"))
    ap.add_argument("--only", nargs="*", default=sorted(MODELS))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for seed, name in enumerate(sorted(MODELS)):
        if name not in args.only:
            continue
        for exporter in ("torchscript", "dynamo"):
            model = randomize(MODELS[name](), seed)
            export(name, model, exporter, args.out)


if __name__ == "__main__":
    main()
