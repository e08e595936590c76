"""Tensor parallelism of the encoders and encoder-decoders
(tfc-compile --tensor-parallel=2, docs/tensor-parallel.md): BERT and
RoBERTa, Marian, BART, mBART, T5 and T5 v1.1 (gated) built for 2 ranks and
run by `mpirun -np 2` give the outputs of the same model built for one rank
within 1e-5 (norm-wise relative): BERT's last hidden state fused and
unfused (in f16 its sentence embedding, both builds against the float64
reference within 10 units of f16's roundoff), RoBERTa's sentence
embedding, the encoder-decoders' logits (the whole model), and
generation's builds of BART and T5: the encoder part with every decoder
layer's cross-attention keys and values (--cross-kv, split by head), the
decoder part's prefill on them with a KV cache, and one decode step on the
1-rank prefill's cache (BART after --past-len, T5 with --position-ids:
T5's relative position bias gathered per rank from its heads' columns of
the table). Each rank binds the replicated weights and exactly half of
each split one (tfc-run --memory). The errors, one line and exit 1 each:
2 ranks that divide no heads or feed-forward width of each family,
--attention-maps, and a family the split does not cover (ViT).

usage: tensor-parallel-encoders.py BINDIR WORKDIR [SEED]
"""

import importlib
import json
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import encdec  # noqa: E402
import t5  # noqa: E402
import vit  # noqa: E402
tp = importlib.import_module("tensor-parallel")
sys.path.insert(0, os.path.join(HERE, "..", "..", "pylib"))
from tfc_testing import reference, safetensors_file  # noqa: E402
from tfc_testing.arrays import random_tokens, rounded_weights  # noqa: E402
from tfc_testing.harness import start  # noqa: E402

MAKE_BERT = os.path.join(HERE, "..", "..", "Importer", "Inputs",
                         "make_fake_bert.py")
BATCH, SEQ, DEC = tp.BATCH, 9, 5
VOCAB = 40
# 4 heads of 9 features, an intermediate width of 50.
BERT = ["--hidden", "36", "--heads", "4", "--inter", "50", "--layers", "2"]
# 4 heads of 10 features in both stacks, feed-forwards of 56 and 72.
ENCDEC = {name: dict(encdec.CASES[name], decoder_attention_heads=4)
          for name in ("marian", "bart", "mbart")}
# 4 heads of 8 features, d_ff 54.
T5 = {name: dict(t5.CASES[name], d_ff=54) for name in ("t5", "t5v11")}
# The weights each family splits: the column-parallel projections'
# weights and biases, the row-parallel ones' weights (their biases are
# added once, after the sum), T5's relative position bias tables.
SPLIT = {
    "bert": r"\.(query|key|value)\.|intermediate\.dense\.|"
            r"output\.dense\.weight$",
    "encdec": r"\.(q_proj|k_proj|v_proj|fc1)\.|\.(out_proj|fc2)\.weight$",
    "t5": r"\.(q|k|v|o|wi|wi_0|wi_1|wo)\.weight$|relative_attention_bias",
}


def both(h, model, name, flags, inputs, outputs, tol=1e-5):
    """The 1-rank and the 2-rank build of `flags` on `inputs`: every
    output of the second within `tol` of the first's. Returns the 1-rank
    build's outputs and the 2-rank run's stdout."""
    got, stdout = {}, ""
    for ranks in (1, 2):
        lib = tp.build(h, model, name, ranks, flags)
        got[ranks], stdout = tp.run(h, lib, model, inputs, outputs,
                                    "%s_%d" % (name, ranks), ranks,
                                    ["--memory"])
    for k, (two, one) in enumerate(zip(got[2], got[1])):
        h.expect_close("%s output %d: 2 ranks" % (name, k), two, one, tol)
    return got[1], stdout


def check_memory(h, name, model, stdout, split):
    """Each rank of the 2-rank run whose stdout is `stdout` bound every
    float weight of `model` but half of those `split` matches."""
    w = safetensors_file.read(model)
    whole = sum(a.nbytes for a in w.values() if a.dtype == np.float32)
    part = sum(a.nbytes for k, a in w.items() if re.search(split, k))
    want = whole - part // 2
    got = sorted(int(b) for b in re.findall(
        r"rank \d of 2: (\d+) bytes of weights bound", stdout))
    h.expect("%s: each rank binds %d of the %d weight bytes: the replicated "
             "ones and half of the %d split (got %s)" %
             (name, want, whole, part, got), got == [want, want])


def write_bert(h, rng, name, flags):
    model = h.path(name)
    subprocess.run([sys.executable, MAKE_BERT, model, "--vocab", str(VOCAB),
                    "--max-pos", str(SEQ + 4), "--drop", "pooler.dense.weight",
                    "--drop", "pooler.dense.bias", "--seed",
                    str(int(rng.integers(1 << 30)))] + flags, check=True)
    return model


def check_bert_f16(h, model, ids, mask):
    """BERT built in f16, its sentence embedding: the 1-rank and the 2-rank
    build each within minilm.test's f16 tolerance (10 units of f16's
    roundoff) of the float64 reference on the weights rounded to f16. The
    two are held to the reference rather than to each other: the ranks'
    partial sums, added in another order, can round an f16 value the
    other way, a unit that the layers after it carry on."""
    with open(os.path.join(model, "config.json")) as f:
        cfg = json.load(f)
    ref = reference.bert(cfg, rounded_weights(safetensors_file.read(model),
                                              "f16"), "", ids, mask)
    for ranks in (1, 2):
        lib = tp.build(h, model, "bert_f16", ranks,
                       ["--seq-len", str(SEQ), "--dtype=f16"])
        got = tp.run(h, lib, model, [ids, mask], 1, "bert_f16_%d" % ranks,
                     ranks)[0][0]
        h.expect_close("bert_f16 sentence embedding, %d rank%s: against "
                       "float64" % (ranks, "s" if ranks > 1 else ""), got,
                       ref, 10 * 2.0**-11)


def check_bert(h, rng):
    ids, mask = random_tokens(rng, VOCAB, BATCH, SEQ, padding=3)
    model = write_bert(h, rng, "bert", BERT)
    seq = ["--seq-len", str(SEQ)]
    _, stdout = both(h, model, "bert_hidden", seq + ["--output=hidden"],
                     [ids, mask], 1)
    check_memory(h, "bert", model, stdout, SPLIT["bert"])
    both(h, model, "bert_unfused", seq + ["--output=hidden", "--no-fusion"],
         [ids, mask], 1)
    check_bert_f16(h, model, ids, mask)
    # RoBERTa's positions and the sentence embedding (mean, normalised).
    model = write_bert(h, rng, "roberta", BERT + ["--family", "roberta"])
    both(h, model, "roberta", seq, [ids, mask], 1)
    return model


def write_encdec(h, rng, name, cfg):
    model = h.path(name)
    write = t5.write_model if "d_kv" in cfg else encdec.write_model
    write(model, rng, cfg)
    return model


def check_whole(h, rng, name, cfg, split, flags=()):
    """The whole model's logits; each rank's weights."""
    model = write_encdec(h, rng, name, cfg)
    ids, mask = random_tokens(rng, cfg["vocab_size"], BATCH, SEQ, padding=3)
    dec = rng.integers(0, cfg["vocab_size"], (BATCH, DEC)).astype(np.int64)
    _, stdout = both(h, model, name, ["--seq-len", str(SEQ),
                                      "--decoder-seq-len", str(DEC),
                                      "--output=logits"] + list(flags),
                     [ids, mask, dec], 1)
    check_memory(h, name, model, stdout, split)


def check_generation(h, rng, name, cfg, layers, positions):
    """Generation's builds: the encoder part with the cross keys and values,
    the decoder part's prefill on them with a KV cache, one decode step on
    the 1-rank prefill's cache (with `positions`, --position-ids)."""
    model = write_encdec(h, rng, name, cfg)
    vocab = cfg["vocab_size"]
    ids, mask = random_tokens(rng, vocab, BATCH, SEQ, padding=3)
    dec = rng.integers(0, vocab, (BATCH, DEC)).astype(np.int64)
    seq = ["--seq-len", str(SEQ), "--output=logits"]
    outputs = 1 + 2 * layers
    enc, _ = both(h, model, name + "_encoder",
                  ["--seq-len", str(SEQ), "--part=encoder", "--cross-kv"],
                  [ids, mask], outputs)
    decoder = ["--part=decoder", "--cross-kv"]
    first, _ = both(h, model, name + "_prefill",
                    seq + decoder + ["--decoder-seq-len", str(DEC),
                                     "--kv-cache"],
                    [dec] + enc[1:] + [mask], outputs)
    step = rng.integers(0, vocab, (BATCH, 1)).astype(np.int64)
    inputs = [step] + enc[1:] + [mask]
    flags = seq + decoder + ["--decoder-seq-len", "1", "--past-len", str(DEC)]
    if positions:
        flags.append("--position-ids")
        inputs += [np.ones((BATCH, DEC + 1), np.int64),
                   np.full((BATCH, 1), DEC, np.int64)]
    both(h, model, name + "_step", flags, inputs + first[1:], outputs)
    heads = cfg.get("num_heads") or cfg["decoder_attention_heads"]
    check_split_ir(h, model, name + "_step", flags, heads)


def check_split_ir(h, model, name, flags, heads):
    """The 2-rank build's graph (--emit=mlir): every cached and cross key
    and value it takes or returns, and each relative_attention_bias table,
    is its rank's part, heads / 2 along axis 1, marked split there."""
    ir = h.path(name + "_tp2.mlir")
    subprocess.run(tp.compile_cmd(h, model, ir, flags + [
        "--tensor-parallel=2", "--emit=mlir"]), check=True,
        stderr=subprocess.PIPE)
    with open(ir) as f:
        text = f.read()
    found = 0
    for shape, attrs in re.findall(r"tensor<([0-9x]+)xf32> \{([^}]*)\}",
                                   text):
        tensor = re.search(r'tfc.name = "([^"]+)"', attrs).group(1)
        if not re.search(r"key_values\.|present\.|relative_attention_bias",
                         tensor):
            continue
        found += 1
        h.expect("%s: %s [%s] is its rank's %d heads, split on axis 1" %
                 (name, tensor, shape, heads // 2),
                 int(shape.split("x")[1]) == heads // 2 and
                 "tfc.split = array<i64: 1, 1>" in attrs)
    h.expect("%s: the graph takes and returns split keys and values (%d)" %
             (name, found), found > 0)


def one_line_error(h, label, model, flags, message):
    tp.one_line_error(h, label, tp.compile_cmd(h, model, h.path("x.so"),
                                               flags), message)


def check_errors(h, rng, roberta):
    seq = ["--seq-len", "4", "--tensor-parallel=2"]
    dec = seq + ["--decoder-seq-len", "2"]
    for name, flags, what in (
            ("bert_3heads", ["--hidden", "36", "--heads", "3"],
             "num_attention_heads (3)"),
            ("bert_inter_51", ["--inter", "51"], "intermediate_size (51)")):
        one_line_error(h, "--tensor-parallel=2 of " + name,
                       write_bert(h, rng, name, flags), seq,
                       "2 ranks do not divide %s" % what)
    for name, cfg, flags, what in (
            ("bart_5heads", encdec.CASES["bart"], dec,
             "decoder_attention_heads (5)"),
            ("bart_ffn_55", dict(ENCDEC["bart"], encoder_ffn_dim=55),
             seq + ["--part=encoder"], "encoder_ffn_dim (55)"),
            ("t5_3heads", dict(T5["t5"], num_heads=3), dec, "num_heads (3)"),
            ("t5_ff_49", dict(T5["t5v11"], d_ff=49), dec, "d_ff (49)")):
        one_line_error(h, "--tensor-parallel=2 of " + name,
                       write_encdec(h, rng, name, cfg), flags,
                       "2 ranks do not divide %s" % what)
    one_line_error(h, "--tensor-parallel=2 --attention-maps of RoBERTa",
                   roberta, seq + ["--attention-maps=0"],
                   "--tensor-parallel=2: --attention-maps")
    one_line_error(h, "--tensor-parallel=2 --attention-maps of BART",
                   h.path("bart"), dec + ["--attention-maps=cross.0"],
                   "--tensor-parallel=2: --attention-maps")
    model = h.path("vit")
    vit.write_model(model, rng, vit.VIT_CLS)
    one_line_error(h, "--tensor-parallel=2 of ViT", model,
                   ["--tensor-parallel=2"], "is not split across ranks")


def main():
    h, rng, _ = start(sys.argv[1:])
    roberta = check_bert(h, rng)
    check_whole(h, rng, "marian", ENCDEC["marian"], SPLIT["encdec"])
    check_whole(h, rng, "mbart", ENCDEC["mbart"], SPLIT["encdec"],
                ["--no-fusion"])
    check_whole(h, rng, "t5", T5["t5"], SPLIT["t5"])
    check_whole(h, rng, "t5v11", T5["t5v11"], SPLIT["t5"])
    check_generation(h, rng, "bart", ENCDEC["bart"],
                     ENCDEC["bart"]["decoder_layers"], False)
    check_generation(h, rng, "t5_generation", T5["t5"],
                     T5["t5"]["num_decoder_layers"], True)
    check_errors(h, rng, roberta)
    h.finish()


if __name__ == "__main__":
    main()
