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
import inspect
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
            if p.requires_grad:  # Frozen tables (sinusoidal) stay as built.
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


class PixelHiddenState(torch.nn.Module):
    """A transformers vision model called on pixel values, returning the
    last hidden state."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixel_values):
        return self.model(pixel_values=pixel_values).last_hidden_state


class Seq2SeqHiddenState(torch.nn.Module):
    """A transformers encoder-decoder called with keyword inputs, returning
    the decoder's last hidden state."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, decoder_input_ids):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                         decoder_input_ids=decoder_input_ids, use_cache=False)
        return out.last_hidden_state


def attention_projections(d_model):
    return torch.nn.ModuleDict({
        name: torch.nn.Linear(d_model, d_model) for name in "qkvo"})


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

    def attention(self, layer, x, mask, memory=None):
        """Self-attention of x, or x's attention to `memory` (K/V)."""
        memory = x if memory is None else memory
        b = x.shape[0]
        split = lambda t: t.view(b, t.shape[1], self.heads,
                                 self.d_k).transpose(1, 2)
        q = split(layer["q"](x))
        k, v = split(layer["k"](memory)), split(layer["v"](memory))
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.d_k)
        scores = scores.masked_fill(mask == 0, -1e9)
        p = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(p, v).transpose(1, 2).contiguous()
        return layer["o"](ctx.view(b, x.shape[1], -1))

    def embed_tokens(self, ids):
        return self.embed(ids) * math.sqrt(HIDDEN) + self.pe[:ids.shape[1]]

    def encode(self, input_ids, attention_mask):
        x = self.embed_tokens(input_ids)
        mask = attention_mask[:, None, None, :]
        for layer in self.layers:
            x = layer["ln1"](x + self.attention(layer, x, mask))
            x = layer["ln2"](x + layer["ff2"](torch.relu(layer["ff1"](x))))
        return x

    def forward(self, input_ids, attention_mask):
        return self.encode(input_ids, attention_mask)


class SeedTransformer(SeedEncoderLayer):
    """The whole model of "Attention Is All You Need": the encoder above and
    a decoder whose self-attention is causal, masked_fill(tril == 0, -1e9),
    and whose cross-attention takes K and V from the encoder's output;
    post-LayerNorm, one embedding shared by both."""

    def __init__(self, layers=2, d_model=HIDDEN, heads=HEADS, d_ff=48):
        super().__init__(layers, d_model, heads, d_ff)
        self.decoder = torch.nn.ModuleList()
        for _ in range(layers):
            self.decoder.append(torch.nn.ModuleDict({
                "self": attention_projections(d_model),
                "cross": attention_projections(d_model),
                "ln1": torch.nn.LayerNorm(d_model),
                "ln2": torch.nn.LayerNorm(d_model),
                "ff1": torch.nn.Linear(d_model, d_ff),
                "ff2": torch.nn.Linear(d_ff, d_model),
                "ln3": torch.nn.LayerNorm(d_model),
            }))

    def forward(self, input_ids, attention_mask, decoder_input_ids):
        memory = self.encode(input_ids, attention_mask)
        src_mask = attention_mask[:, None, None, :]
        t = decoder_input_ids.shape[1]
        causal = torch.tril(torch.ones(t, t, dtype=torch.int64))
        y = self.embed_tokens(decoder_input_ids)
        for layer in self.decoder:
            y = layer["ln1"](y + self.attention(layer["self"], y, causal))
            y = layer["ln2"](y + self.attention(layer["cross"], y, src_mask,
                                                memory))
            y = layer["ln3"](y + layer["ff2"](torch.relu(layer["ff1"](y))))
        return y


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
    if name.startswith("t5"):
        cfg = t.T5Config(vocab_size=VOCAB, d_model=HIDDEN, d_kv=8, d_ff=48,
                         num_layers=2, num_decoder_layers=2, num_heads=HEADS,
                         relative_attention_num_buckets=8,
                         relative_attention_max_distance=16,
                         feed_forward_proj="gated-gelu" if name == "t5-gated"
                         else "relu", decoder_start_token_id=0)
        # T5's SDPA path reshapes a transposed tensor, which the dynamo
        # exporter fails to decompose: its eager attention, for both.
        cfg._attn_implementation = "eager"
        return t.T5Model(cfg)
    if name in ("bart", "marian"):
        config = t.BartConfig if name == "bart" else t.MarianConfig
        cfg = config(vocab_size=VOCAB, d_model=HIDDEN, encoder_layers=2,
                     decoder_layers=2, encoder_attention_heads=HEADS,
                     decoder_attention_heads=HEADS, encoder_ffn_dim=48,
                     decoder_ffn_dim=48, max_position_embeddings=64,
                     pad_token_id=1, decoder_start_token_id=2)
        return (t.BartModel if name == "bart" else t.MarianModel)(cfg)
    if name == "vit":
        cfg = t.ViTConfig(image_size=32, patch_size=8, num_channels=3,
                          hidden_size=HIDDEN, num_hidden_layers=2,
                          num_attention_heads=HEADS, intermediate_size=48)
        return t.ViTModel(cfg, add_pooling_layer=False)
    raise ValueError(name)


MODELS = {
    "bert": lambda: HiddenState(transformers_model("bert")),
    "gpt2": lambda: HiddenState(transformers_model("gpt2")),
    "llama": lambda: HiddenState(transformers_model("llama")),
    "seed": SeedEncoderLayer,
    "t5": lambda: Seq2SeqHiddenState(transformers_model("t5")),
    "t5-gated": lambda: Seq2SeqHiddenState(transformers_model("t5-gated")),
    "bart": lambda: Seq2SeqHiddenState(transformers_model("bart")),
    "marian": lambda: Seq2SeqHiddenState(transformers_model("marian")),
    "seed2seq": SeedTransformer,
    "vit": lambda: PixelHiddenState(transformers_model("vit")),
}


def strip_node_metadata(path):
    """Drops the PyTorch origin (stack traces) the dynamo exporter records in
    every node: most of the file, read by neither tfc nor ONNX Runtime."""
    import onnx
    m = onnx.load(path, load_external_data=False)
    for node in m.graph.node:
        del node.metadata_props[:]
    onnx.save(m, path)


def export(name, model, exporter, out):
    ids = torch.randint(0, VOCAB, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.int64)
    mask[1, 6:] = 0
    # Encoder-decoders: a decoder length of its own (Sq != Skv in the
    # cross-attention). Each input's dimension 1 is dynamic where named;
    # a ViT's image size is fixed.
    inputs = {"input_ids": (ids, "sequence"),
              "attention_mask": (mask, "sequence"),
              "decoder_input_ids": (torch.randint(0, VOCAB, (2, 5)),
                                    "decoder_sequence"),
              "pixel_values": (torch.randn(2, 3, 32, 32), None)}
    names = [n for n in inspect.signature(model.forward).parameters]
    args = tuple(inputs[n][0] for n in names)
    path = os.path.join(out, f"{name}-{exporter}.onnx")
    kw = dict(input_names=names, output_names=["last_hidden_state"])
    if exporter == "dynamo":
        dims = {d: torch.export.Dim(d)
                for d in ["batch"] + [inputs[n][1] for n in names] if d}
        kw["dynamic_shapes"] = {
            n: {0: dims["batch"], **({1: dims[inputs[n][1]]}
                                     if inputs[n][1] else {})}
            for n in names}
        torch.onnx.export(model, args, path, dynamo=True, **kw)
        strip_node_metadata(path)
    else:
        kw["dynamic_axes"] = {n: {0: "batch", **({1: inputs[n][1]}
                                                 if inputs[n][1] else {})}
                              for n in names}
        torch.onnx.export(model, args, path, dynamo=False,
                          opset_version=17, **kw)
    print(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "models"))
    ap.add_argument("--only", nargs="*", default=sorted(MODELS))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    # Seeds in MODELS' order: a model added last leaves the others' weights.
    for seed, name in enumerate(MODELS):
        if name not in args.only:
            continue
        for exporter in ("torchscript", "dynamo"):
            model = randomize(MODELS[name](), seed)
            export(name, model, exporter, args.out)


if __name__ == "__main__":
    main()
