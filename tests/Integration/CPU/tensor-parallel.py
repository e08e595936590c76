"""Tensor parallelism (tfc-compile --tensor-parallel=2,
docs/tensor-parallel.md): a LLaMA with grouped-query attention and a GPT-2
(c_attn's Q, K and V each split by heads) built for 2 ranks and run by
`mpirun -np 2` give the outputs of the same model built for one rank: the
logits and every layer's keys and values of a prefill (padded row) within
1e-5 (norm-wise relative), fused and unfused, and in f16 and bf16 both
builds within 10 units of the type's roundoff of the f32 build; then of a
one-token decode step on the
1-rank build's cache. The token embeddings and the LM head are split by
vocabulary (an odd one, 101; a LLaMA with its head tied to them too), or
replicated (--tensor-parallel-vocab=replicate). Each rank binds the
replicated weights, exactly half of each split one and ceil(vocab / 2) rows
of each vocabulary table; GPT-2's 2-rank graph holds wte's rows marked
split of the whole vocab and one all-gather of the logits. The errors:
ranks that divide no heads, K/V heads or MLP width, a family or flag the
split does not cover, ONNX, a rank count of 0, a --tensor-parallel-vocab other than split or replicate
(tfc-compile, one line, exit 1); a weights file of another vocabulary, the
2-rank build run as 1 or 3 processes, without its MPI library, with
--packed-weights or --concurrency, on a rank's part of the cache instead of
the whole, or with a rank that stops calling the all-reduce (one line, exit
1, no hang).

usage: tensor-parallel.py BINDIR WORKDIR [SEED]
"""

import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2  # noqa: E402
import llama  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "pylib"))
from tfc_testing.arrays import bf16_to_f32, random_tokens  # noqa: E402
from tfc_testing.harness import start  # noqa: E402

BATCH, SEQ = 2, 9
LLAMA = dict(llama.CFG)  # 4 heads on 2 K/V heads, MLP width 100
GPT2 = dict(gpt2.CFG, n_head=4)  # MLP width 4 * 48
MPIRUN = ["mpirun", "-q", "--oversubscribe"] + (
    ["--allow-run-as-root"] if os.geteuid() == 0 else [])


def compile_cmd(h, model, lib, flags):
    return [h.compile, "--hf", model, "--batch", str(BATCH), "-o",
            lib] + flags


def build(h, model, name, ranks, flags):
    lib = h.path("%s_tp%d.so" % (name, ranks))
    subprocess.run(compile_cmd(h, model, lib, flags +
                               ["--tensor-parallel=%d" % ranks]),
                   check=True, stderr=subprocess.PIPE)
    return lib


def run(h, lib, model, inputs, outputs, stem, ranks, extra=()):
    """Runs `lib` (as `ranks` MPI ranks when more than one) on `inputs`;
    returns (its outputs, stdout)."""
    args = [h.run_tool, lib, "--weights",
            os.path.join(model, "model.safetensors")] + list(extra)
    for k, a in enumerate(inputs):
        p = h.path("%s_in%d.npy" % (stem, k))
        np.save(p, a)
        args += ["--input", p]
    outs = [h.path("%s_out%d.npy" % (stem, k)) for k in range(outputs)]
    for p in outs:
        args += ["--output", p]
    if ranks > 1:
        args = MPIRUN + ["-np", str(ranks)] + args
    done = subprocess.run(args, check=True, capture_output=True, text=True)
    return [np.load(p) for p in outs], done.stdout


def split_bytes(model, layers, gpt, vocab_split=True):
    """The bytes of model.safetensors' weights that a rank of two binds:
    all of the replicated ones, half of the split ones, and ceil(vocab / 2)
    rows of the tables split by vocabulary (the token embeddings and the LM
    head, the second rank's last row padding); and all of them."""
    w = gpt2.read_weights(model)
    whole = sum(a.nbytes for a in w.values())
    part = whole
    for name, a in w.items():
        if vocab_split and re.search(r"(wte|embed_tokens|lm_head)\.weight$",
                                     name):
            part -= a.nbytes - (a.shape[0] + 1) // 2 * (a.nbytes // a.shape[0])
        elif gpt:
            # c_attn, c_fc (weights and biases), both c_proj weights; not
            # the row-parallel c_proj biases (added once, after the sum).
            if re.search(r"\.(c_attn|c_fc)\.", name) or \
                    re.search(r"\.c_proj\.weight$", name):
                part -= a.nbytes // 2
        elif re.search(r"\.(q|k|v|o|gate|up|down)_proj\.weight$", name):
            part -= a.nbytes // 2
    return part, whole


def check_model(h, rng, name, cfg, write, layers, gpt, variants=True):
    model = h.path(name)
    write(model, rng, cfg)
    vocab = cfg["vocab_size"]
    ids, mask = random_tokens(rng, vocab, BATCH, SEQ, padding=3)
    ids[:, -1] = vocab - 1, 0  # the last rank's last row, and the first
    outputs = 1 + 2 * layers
    labels = ["logits"] + ["present.%d.%s" % (l, kv) for l in range(layers)
                           for kv in ("key", "value")]

    def both(tag, flags, inputs, tol, against=None):
        """The 1-rank and the 2-rank build of `flags` on `inputs`: every
        output of the second within `tol` of the first's, or with
        `against` (outputs of f32 builds) every output of each within `tol`
        of those. Returns the 1-rank build's outputs and the 2-rank run's
        stdout."""
        got = {}
        for ranks in (1, 2):
            lib = build(h, model, "%s_%s" % (name, tag), ranks,
                        flags + ["--output=logits"])
            got[ranks], stdout = run(h, lib, model, inputs, outputs,
                                     "%s_%s_%d" % (name, tag, ranks), ranks,
                                     ["--memory"])
        for label, two, one, ref in zip(labels, got[2], got[1],
                                        against or got[1]):
            if two.dtype == np.uint16:  # bf16
                two, one = bf16_to_f32(two), bf16_to_f32(one)
            if against is None:
                h.expect_close("%s %s %s: 2 ranks" % (name, tag, label), two,
                               one, tol)
                continue
            for ranks, out in ((1, one), (2, two)):
                h.expect_close("%s %s %s: %d rank%s against f32" % (
                    name, tag, label, ranks, "s" if ranks > 1 else ""),
                    out, ref.astype(np.float64), tol)
        return got[1], stdout

    prefill = ["--seq-len", str(SEQ), "--kv-cache"]
    first, stdout = both("prefill", prefill, [ids, mask], 1e-5)
    got = sorted(int(b) for b in re.findall(
        r"rank \d of 2: (\d+) bytes of weights bound", stdout))
    part, whole = split_bytes(model, layers, gpt)
    h.expect("%s: each rank binds %d of the %d weight bytes (%.2f): the "
             "replicated ones, half of the split ones and %d of the %d rows "
             "of each table split by vocabulary (got %s)" %
             (name, part, whole, part / whole, (cfg["vocab_size"] + 1) // 2,
              cfg["vocab_size"], got), got == [part, part])
    # The unfused build. f16 and bf16: the partial products are summed in
    # f32 and rounded once, but in another order than one rank's, which
    # can round a value the other way, a unit that the layers after carry
    # on: both builds within the f16 and bf16 model tolerance (llama.test's
    # and minilm.test's, 10 units of the type's roundoff) of the f32 build.
    if variants:
        both("prefill_unfused", prefill + ["--no-fusion"], [ids, mask], 1e-5)
        for dtype, tol in (("f16", 10 * 2.0**-11), ("bf16", 10 * 2.0**-8)):
            both("prefill_" + dtype, prefill + ["--dtype=" + dtype],
                 [ids, mask], tol, against=first)
    # One token after the prefill, on the 1-rank build's cache.
    step_ids = rng.integers(0, vocab, (BATCH, 1)).astype(np.int64)
    step_mask = np.concatenate([mask, np.ones((BATCH, 1), np.int64)], 1)
    both("decode", ["--seq-len", "1", "--past-len", str(SEQ)],
         [step_ids, step_mask] + first[1:], 1e-5)
    # A rank's part of the cache where the whole is expected.
    heads = first[1].shape[1]
    args = [h.run_tool, h.path(name + "_decode_tp2.so"), "--weights",
            os.path.join(model, "model.safetensors")]
    for k, a in enumerate([step_ids, step_mask, first[1][:, :heads // 2]] +
                          first[2:]):
        np.save(h.path("%s_part_in%d.npy" % (name, k)), a)
        args += ["--input", h.path("%s_part_in%d.npy" % (name, k))]
    for k in range(outputs):
        args += ["--output", h.path("%s_part_out%d.npy" % (name, k))]
    one_line_error(h, "%s: a rank's part of past_key_values.0.key" % name,
                   MPIRUN + ["-np", "2"] + args,
                   "input 2 'past_key_values.0.key': expected the whole "
                   "tensor, axis 1 of %d (2 ranks' parts of %d)" %
                   (heads, heads // 2))
    return model, ids, mask


def check_vocabulary_ir(h, model, cfg):
    """GPT-2's 2-rank graph (--emit=mlir): wte is the rank's ceil(vocab / 2)
    rows, marked split on axis 0 of the whole vocab; input_ids is bounded
    by the vocab (no gather of the whole table implies it); the embeddings
    take the rank's index once, and the logits of the rank's rows are
    gathered to 2 parts and cut back to the vocab."""
    vocab, hidden, part = cfg["vocab_size"], cfg["n_embd"], \
        (cfg["vocab_size"] + 1) // 2
    ir = h.path("gpt2_vocab_tp2.mlir")
    subprocess.run(compile_cmd(h, model, ir, [
        "--seq-len", str(SEQ), "--output=logits", "--tensor-parallel=2",
        "--emit=mlir"]), check=True, stderr=subprocess.PIPE)
    with open(ir) as f:
        text = f.read()
    rows = BATCH * SEQ
    for what, pattern, count in (
            ("wte: the rank's rows, split of %d" % vocab,
             r'tensor<%dx%dxf32> \{tfc.name = "transformer.wte.weight", '
             r'tfc.role = "weight", tfc.split = array<i64: 0, 1, %d>\}' %
             (part, hidden, vocab), 1),
            ("input_ids bounded by the vocab",
             r'tensor<%dx%dxi64> \{tfc.bounds = array<i64: 0, %d>, '
             r'tfc.name = "input_ids"' % (BATCH, SEQ, vocab), 1),
            ("one transformer.parallel_rank", r"transformer\.parallel_rank",
             1),
            ("one all-gather of the logits",
             r"transformer\.all_gather %%\S+ : tensor<1x%dx%dxf32> -> "
             r"tensor<1x%dx%dxf32>" % (rows, part, rows, 2 * part), 1),
            ("the logits cut back to the vocab",
             r"tosa\.slice .* : \(tensor<1x%dx%dxf32>, .*\) -> "
             r"tensor<1x%dx%dxf32>" % (rows, 2 * part, rows, vocab), 1)):
        found = len(re.findall(pattern, text))
        h.expect("gpt2 2-rank graph: %s (%d found)" % (what, found),
                 found == count)


def check_replicated(h, model, ids, mask, layers):
    """--tensor-parallel-vocab=replicate: GPT-2's 2-rank build with the
    token embeddings and the head whole on each rank gives the 1-rank
    build's logits, and each rank binds all of wte."""
    got = {}
    for ranks in (1, 2):
        lib = build(h, model, "gpt2_replicated", ranks,
                    ["--seq-len", str(SEQ), "--output=logits",
                     "--tensor-parallel-vocab=replicate"])
        (got[ranks],), stdout = run(h, lib, model, [ids, mask], 1,
                                    "gpt2_replicated_%d" % ranks, ranks,
                                    ["--memory"])
    h.expect_close("gpt2 --tensor-parallel-vocab=replicate logits: 2 ranks",
                   got[2], got[1], 1e-5)
    bound = sorted(int(b) for b in re.findall(
        r"rank \d of 2: (\d+) bytes of weights bound", stdout))
    part, _ = split_bytes(model, layers, True, vocab_split=False)
    h.expect("gpt2 --tensor-parallel-vocab=replicate: each rank binds %d "
             "weight bytes, all of wte (got %s)" % (part, bound),
             bound == [part, part])


def run_args(h, lib, model, ids, mask):
    """tfc-run's arguments for `lib` of `model` on `ids` and `mask`
    (saved as e_ids.npy and e_mask.npy), writing e_out.npy."""
    np.save(h.path("e_ids.npy"), ids)
    np.save(h.path("e_mask.npy"), mask)
    return [h.run_tool, lib, "--weights",
            os.path.join(model, "model.safetensors"), "--input",
            h.path("e_ids.npy"), "--input", h.path("e_mask.npy"),
            "--output", h.path("e_out.npy")]


def one_line_error(h, label, args, message, env=None):
    done = subprocess.run(args, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, **(env or {})))
    lines = done.stderr.strip().splitlines()
    h.expect("%s: exit 1, one line: %s" % (label, lines),
             done.returncode == 1 and len(lines) == 1 and
             message in lines[0])


def check_errors(h, llama_model, gpt_model, ids, mask):
    x = h.path("x.so")
    for model, ranks, what in ((llama_model, 3, "num_attention_heads (4)"),
                               (llama_model, 4, "num_key_value_heads (2)")):
        one_line_error(h, "--tensor-parallel=%d of LLaMA" % ranks,
                       compile_cmd(h, model, x, ["--seq-len", "4",
                                                 "--tensor-parallel=%d" %
                                                 ranks]),
                       "%d ranks do not divide %s" % (ranks, what))
    # Models whose sizes or layout the split does not take.
    for k, (name, write, cfg, message) in enumerate((
            ("gpt2_3heads", gpt2.write_model, gpt2.CFG,
             "2 ranks do not divide n_head (3)"),
            ("llama_mlp_99", llama.write_model,
             dict(LLAMA, intermediate_size=99),
             "2 ranks do not divide intermediate_size (99)"),
            ("phi3", llama.write_model, llama.PHI3,
             "Phi-3's fused projections are not split across ranks"))):
        model = h.path(name)
        write(model, np.random.default_rng(k), cfg)
        one_line_error(h, "--tensor-parallel=2 of " + name,
                       compile_cmd(h, model, x, ["--seq-len", "4",
                                                 "--tensor-parallel=2"]),
                       message)
    for flags, message in (
            (["--tensor-parallel=0"], "--tensor-parallel: expected a rank "
             "count from 1 to 4096, got 0"),
            (["--tensor-parallel=2", "--tensor-parallel-vocab=halves"],
             "--tensor-parallel-vocab: expected split or replicate, got "
             "halves"),
            (["--tensor-parallel=2", "--attention-maps=0"],
             "--tensor-parallel=2: --attention-maps")):
        one_line_error(h, " ".join(flags),
                       compile_cmd(h, llama_model, x,
                                   ["--seq-len", "4"] + flags), message)
    one_line_error(h, "--tensor-parallel=2 of an ONNX file",
                   [h.compile, os.path.join(os.path.dirname(
                       os.path.abspath(__file__)), "..", "..", "Importer",
                       "ONNX", "Inputs", "minilm", "minilm.onnx"),
                    "-o", x, "--tensor-parallel=2"],
                   "--tensor-parallel applies to Hugging Face imports")

    # The 2-rank build run wrongly: no hang, one line (rank 0's).
    lib = build(h, llama_model, "llama_errors", 2, ["--seq-len", str(SEQ)])
    args = run_args(h, lib, llama_model, ids, mask)
    one_line_error(h, "2-rank build as one process", args,
                   "built for 2 ranks (tfc-compile --tensor-parallel=2) and "
                   "run as a single process: run it as mpirun -np 2")
    one_line_error(h, "2-rank build as 3 ranks",
                   MPIRUN + ["-np", "3"] + args,
                   "built for 2 ranks (tfc-compile --tensor-parallel=2) and "
                   "run as one of 3 ranks")
    for flags, message in (
            (["--packed-weights", h.path("w.packed")],
             "--packed-weights: the ranks of a tensor-parallel model pack "
             "different parts"),
            (["--repeat", "1", "--concurrency", "2"],
             "--concurrency: a tensor-parallel model runs one call at a "
             "time")):
        one_line_error(h, "tfc-run %s of the 2-rank build" % flags[0],
                       MPIRUN + ["-np", "2"] + args + flags, message)
    # The file's vocabulary is not the one the padded parts were cut for.
    other = h.path("llama_vocab100")
    llama.write_model(other, np.random.default_rng(5),
                      dict(LLAMA, vocab_size=100))
    one_line_error(h, "a weights file of another vocabulary",
                   MPIRUN + ["-np", "2"] + args[:3] +
                   [os.path.join(other, "model.safetensors")] + args[4:],
                   "tensor 'model.embed_tokens.weight': model %s expects f32 "
                   "[101, %d] (split across 2 ranks), the file has f32 "
                   "[100, %d]" % (lib, LLAMA["hidden_size"],
                                  LLAMA["hidden_size"]))
    one_line_error(h, "TFC_MPI_LIBRARY missing",
                   MPIRUN + ["-np", "2", "-x", "TFC_MPI_LIBRARY"] + args,
                   "cannot open the MPI library /nonexistent/libmpi.so.40",
                   env={"TFC_MPI_LIBRARY": "/nonexistent/libmpi.so.40"})
    one_line_error(h, "GPT-2's 2-rank build as one process",
                   [h.run_tool, build(h, gpt_model, "gpt2_errors", 2,
                                      ["--seq-len", str(SEQ)]),
                    "--describe"],
                   "built for 2 ranks")
    # Rank 1 runs a 1-block build of the same widths: after its 2
    # all-reduces it stops, and rank 0 waits for its third until the time
    # limit (TFC_COLLECTIVE_TIMEOUT, 2 s).
    short = h.path("llama_1block")
    llama.write_model(short, np.random.default_rng(4),
                      dict(LLAMA, num_hidden_layers=1))
    short_lib = build(h, short, "llama_1block", 2, ["--seq-len", str(SEQ)])
    short_args = [h.run_tool, short_lib, "--weights",
                  os.path.join(short, "model.safetensors")] + args[4:]
    one_line_error(h, "a rank that stops calling the all-reduce",
                   MPIRUN + ["-x", "TFC_COLLECTIVE_TIMEOUT", "-np", "1"] +
                   args + [":", "-np", "1"] + short_args,
                   "did not complete within 2 s (TFC_COLLECTIVE_TIMEOUT): "
                   "another of the 2 ranks did not join it",
                   env={"TFC_COLLECTIVE_TIMEOUT": "2"})


def main():
    h, rng, _ = start(sys.argv[1:])
    llama_model, ids, mask = check_model(h, rng, "llama", LLAMA,
                                         llama.write_model,
                                         LLAMA["num_hidden_layers"], False)
    # Tied to the token embeddings, the head shares their vocabulary part.
    check_model(h, rng, "llama_tied", dict(LLAMA, tie_word_embeddings=True),
                llama.write_model, LLAMA["num_hidden_layers"], False,
                variants=False)
    gpt_model, gpt_ids, gpt_mask = check_model(h, rng, "gpt2", GPT2,
                                               gpt2.write_model,
                                               GPT2["n_layer"], True)
    check_replicated(h, gpt_model, gpt_ids, gpt_mask, GPT2["n_layer"])
    check_vocabulary_ir(h, gpt_model, GPT2)
    check_errors(h, llama_model, gpt_model, ids, mask)
    h.finish()


if __name__ == "__main__":
    main()
