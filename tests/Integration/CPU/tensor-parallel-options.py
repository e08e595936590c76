"""tfc-compile --tensor-parallel=2 with the other build options
(docs/tensor-parallel.md): each combination the split takes gives, run by
`mpirun -np 2`, the outputs of the 1-rank build of the same options (the
logits and every layer's keys and values; 1e-5 norm-wise relative in f32,
10 units of the type's roundoff in f16 and bf16), on a LLaMA with
grouped-query attention and a GPT-2:
- --quantize-weights=int4 (fused, unfused, with
  --quantize-activations=int8: row by row) where each rank holds whole
  groups of 128 inputs of every row-parallel projection (o_proj,
  down_proj, c_proj);
- an f16 or bf16 checkpoint bound by an f32, f16 or bf16 build (each
  rank's part converted as it is bound);
- several batch sizes and lengths (--batch 1,4 --seq-len 8,16 --kv-cache)
  run at sizes that pad; a decode build of several batch sizes with
  --past-len, --position-ids and --present=new.
- --quantize-weights=int8 and int4 where the ranks' parts of a
  row-parallel projection's inputs are not whole groups: against the
  float64 reference on the weights as each rank scales its part.
The combinations it refuses, one line naming both flags, exit 1:
--quantize-activations=int8 with a rank's part of a row-parallel
projection not whole blocks of 128 (naming the projection),
--verify-fusion (tfc-compile; either on a split module of tfc-import
--tensor-parallel=2 too); packed weights of a split model through Python
(tfc.Model(packed_weights=...)) and the C API (save_packed_weights,
load_packed_weights).

usage: tensor-parallel-options.py BINDIR WORKDIR [SEED]
       tensor-parallel-options.py --packed LIB WEIGHTS WORKDIR RUNTIME
         (each MPI rank of the packed weights checks)
"""

import importlib
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "pylib"))
from tfc_testing import safetensors_file  # noqa: E402
from tfc_testing.arrays import (bf16_to_f32, f32_to_bf16,  # noqa: E402
                                random_tokens)
from tfc_testing.harness import start  # noqa: E402
from tfc_testing.reference import quantized_weight  # noqa: E402

tp = importlib.import_module("tensor-parallel")
llama, gpt2 = tp.llama, tp.gpt2

BATCH, SEQ, PAST = 2, 9, 9
# Each rank's inputs of o_proj / c_proj (hidden / 2) and of down_proj /
# c_proj of the MLP (intermediate / 2): 128, whole int4 groups.
LLAMA_G = dict(tp.LLAMA, hidden_size=256, intermediate_size=256)
GPT2_G = dict(tp.GPT2, n_embd=256, n_inner=256)
A8 = "--quantize-activations=int8"
# f16 and bf16: the ranks sum their partial products in f32 and round
# once, but in another order than one rank, which can round a value the
# other way, a unit the layers after carry on: the two builds agree within
# the type's model tolerance (llama.test's against float64, 10 units of its
# roundoff), not one unit.
TOL = {"f32": 1e-5, "f16": 10 * 2.0**-11, "bf16": 10 * 2.0**-8}


def write_as(h, src, name, dtype):
    """A copy of model directory `src` whose weights are stored in `dtype`
    (f16 or bf16)."""
    dst = h.path(name)
    os.makedirs(dst, exist_ok=True)
    shutil.copy(os.path.join(src, "config.json"), dst)
    w = gpt2.read_weights(src)
    path = os.path.join(dst, "model.safetensors")
    if dtype == "f16":
        safetensors_file.write_arrays(
            path, {k: v.astype(np.float16) for k, v in w.items()},
            {"format": "pt"})
    else:
        safetensors_file.write(path, [(k, "BF16", v.shape,
                                       f32_to_bf16(v).tobytes())
                                      for k, v in w.items()],
                               {"format": "pt"})
    return dst


def both(h, label, model, flags, runs, outputs, tol, rows=False):
    """Builds `model` with `flags` for 1 and for 2 ranks, runs each on
    every input list of `runs`, and expects every output of the second
    within `tol` of the first's; with `rows` (quantized activations), row
    by row (Harness.expect_rows_close: an activation within roundoff of a
    rounding boundary may round the other way on the ranks, whose f32 sums
    are in another order, and move its token's later rows by a quantum)."""
    libs = {}
    for ranks in (1, 2):
        libs[ranks] = h.path("%s_tp%d.so" % (label, ranks))
        batch = [] if "--batch" in flags else ["--batch", str(BATCH)]
        subprocess.run([h.compile, "--hf", model, "-o", libs[ranks]] +
                       batch + flags + ["--output=logits",
                                        "--tensor-parallel=%d" % ranks],
                       check=True, stderr=subprocess.PIPE)
    for k, inputs in enumerate(runs):
        got = {r: tp.run(h, libs[r], model, inputs, outputs,
                         "%s_%d_%d" % (label, k, r), r)[0] for r in (1, 2)}
        for j, (two, one) in enumerate(zip(got[2], got[1])):
            if two.dtype == np.uint16:  # bf16
                two, one = bf16_to_f32(two), bf16_to_f32(one)
            check = h.expect_rows_close if rows else h.expect_close
            check("%s %s, run %d (batch %d), output %d: 2 ranks" %
                  (label, " ".join(flags), k, inputs[0].shape[0], j), two,
                  one.astype(np.float64), tol)


def prefill(rng, cfg, batch=BATCH, seq=SEQ):
    return list(random_tokens(rng, cfg["vocab_size"], batch, seq,
                              padding=3 if batch > 1 else 0))


def check_quantized(h, rng, name, cfg, write, layers):
    model = h.path(name)
    write(model, rng, cfg)
    kv = ["--seq-len", str(SEQ), "--kv-cache"]
    for tag, flags in (("int4", ["--quantize-weights=int4"]),
                       ("int4_unfused", ["--quantize-weights=int4",
                                         "--no-fusion"]),
                       ("int4_a8", ["--quantize-weights=int4",
                                    "--quantize-activations=int8"])):
        both(h, "%s_%s" % (name, tag), model, kv + flags,
             [prefill(rng, cfg)], 1 + 2 * layers, TOL["f32"],
             rows="--quantize-activations=int8" in flags)


def by_rank(x, axis, bits, ranks=2):
    """Weight `x` quantized as each of `ranks` ranks that split its input
    features (`axis`) quantizes its part: its own int8 scale per output,
    its own int4 groups of 128 from its first input."""
    parts = np.split(np.asarray(x), ranks, axis=axis)
    return np.concatenate([quantized_weight(p, axis, bits) for p in parts],
                          axis=axis)


def check_rank_scales(h, rng, name, cfg, write, reference, head, axis,
                      quantized, rows):
    """--quantize-weights=int8 and int4 where the ranks' parts of the
    row-parallel projections' inputs (`rows`, by weight name suffix) are
    not whole groups: the 2-rank build's logits against the float64
    reference on the weights as the ranks quantize them (by_rank for
    those, whole for the other weights the build quantizes: `quantized`,
    by name suffix, their input features on `axis`), within 1e-5; the
    reference on the 1-rank build's quantization must lie over 10x that
    away, or the check could not tell them apart. `head(x, w, bits)`: the
    LM head's weight as the build quantizes it (`x` the quantized weights,
    `w` those of the file)."""
    model = h.path(name)
    w = write(model, rng, cfg)
    ids, mask = prefill(rng, cfg)
    for bits in (8, 4):
        want, whole = dict(w), dict(w)
        for n in (n for n in w if n.endswith(quantized)):
            whole[n] = quantized_weight(w[n], axis, bits)
            want[n] = by_rank(w[n], axis, bits) if n.endswith(rows) \
                else whole[n]
        ref, one = (reference(cfg, x, ids, mask) @ head(x, w, bits).T
                    for x in (want, whole))
        gap = np.linalg.norm(one - ref) / np.linalg.norm(ref)
        h.expect("%s int%d: the ranks' scales move the reference by %.1e, "
                 "over 10x the tolerance" % (name, bits, gap),
                 gap > 10 * TOL["f32"])
        flags = ["--seq-len", str(SEQ), "--output=logits",
                 "--quantize-weights=int%d" % bits]
        lib = tp.build(h, model, "%s_int%d" % (name, bits), 2, flags)
        got = tp.run(h, lib, model, [ids, mask], 1,
                     "%s_int%d" % (name, bits), 2)[0][0]
        h.expect_close("%s --tensor-parallel=2 --quantize-weights=int%d: "
                       "each rank's scales" % (name, bits), got, ref,
                       TOL["f32"])


def check_checkpoint_types(h, rng, name, cfg, write, layers):
    """Checkpoints in f16 and bf16, each rank's part converted to the
    build's type as it is bound."""
    model = h.path(name)
    write(model, rng, cfg)
    kv = ["--seq-len", str(SEQ), "--kv-cache"]
    for stored, built in (("f16", "f32"), ("f16", "bf16"), ("bf16", "f16"),
                          ("bf16", "f32")):
        copy = write_as(h, model, "%s_%s" % (name, stored), stored)
        both(h, "%s_%s_as_%s" % (name, stored, built), copy,
             kv + ["--dtype=" + built], [prefill(rng, cfg)],
             1 + 2 * layers, TOL[built])
    return model


def check_sizes(h, rng, name, cfg, model, layers, kv_heads, head_dim):
    """Several batch sizes and lengths: prefills that pad to a larger
    build, and decode steps of several batch sizes with the past, new
    positions and the new tokens' keys and values."""
    both(h, name + "_sizes", model,
         ["--batch", "1,4", "--seq-len", "8,16", "--kv-cache"],
         [prefill(rng, cfg), prefill(rng, cfg, 1, 5),
          prefill(rng, cfg, 3, 16)], 1 + 2 * layers, TOL["f32"])
    runs = []
    for batch in (1, 2):
        ids = rng.integers(0, cfg["vocab_size"], (batch, 1)).astype(np.int64)
        mask = np.ones((batch, PAST + 1), np.int64)
        mask[0, :2] = 0
        positions = np.full((batch, 1), PAST, np.int64)
        past = [rng.standard_normal((batch, kv_heads, PAST, head_dim))
                .astype(np.float32) for _ in range(2 * layers)]
        runs.append([ids, mask, positions] + past)
    both(h, name + "_decode", model,
         ["--batch", "1,2", "--seq-len", "1", "--past-len", str(PAST),
          "--position-ids", "--present=new"], runs, 1 + 2 * layers,
         TOL["f32"])


def check_errors(h, rng, llama_model, gpt_model):
    x = h.path("x.so")
    odd_mlp = h.path("llama_mlp_200")
    llama.write_model(odd_mlp, rng, dict(LLAMA_G, intermediate_size=200))
    for model, flags, message in (
            (llama_model, ["--quantize-weights=int4", A8],
             "--tensor-parallel=2 --quantize-activations=int8: the "
             "activations are quantized in blocks of 128 inputs, which the "
             "ranks split in model.layers.0.self_attn.o_proj.weight (24 of "
             "its 48 inputs on each rank): each rank needs a multiple of "
             "128"),
            (gpt_model, ["--quantize-weights=int8", A8],
             "which the ranks split in transformer.h.0.attn.c_proj.weight "
             "(24 of its 48 inputs on each rank)"),
            (odd_mlp, ["--quantize-weights=int4", A8],
             "which the ranks split in model.layers.0.mlp.down_proj.weight "
             "(100 of its 200 inputs on each rank)"),
            (llama_model, ["--verify-fusion"],
             "--verify-fusion runs both builds in this process, and a "
             "--tensor-parallel=2 build runs under mpirun")):
        tp.one_line_error(h, "tfc-compile --tensor-parallel=2 " +
                          " ".join(flags) + " of " +
                          os.path.basename(model),
                          tp.compile_cmd(h, model, x, [
                              "--seq-len", "4", "--tensor-parallel=2"] +
                              flags), message)

    # The same flags on a split module of tfc-import, whose inputs' split
    # tfc-compile does not check against the activations' blocks.
    bindir = os.path.dirname(h.compile)
    mlir = h.path("llama_tp2.mlir")
    subprocess.run([os.path.join(bindir, "tfc-import"), "--hf", llama_model,
                    "--seq-len", "4", "--tensor-parallel=2", "-o", mlir],
                   check=True, stderr=subprocess.PIPE)
    for flag, message in (
            ("--quantize-weights=int4 " + A8, "--quantize-activations: %s "
             "is split across 2 ranks (--tensor-parallel=2): quantize it at "
             "the import" % mlir),
            ("--verify-fusion", "--verify-fusion runs both builds in this "
             "process, and %s is split across 2 ranks" % mlir)):
        tp.one_line_error(h, "tfc-compile %s of a split MLIR module" % flag,
                          [h.compile, mlir] + flag.split() + ["-o", x], message)

    # Packed weights of a split model through Python and the C API: each
    # rank would pack its own part into one file.
    lib = tp.build(h, llama_model, "llama_packed", 2, ["--seq-len", "4"])
    done = subprocess.run(
        tp.MPIRUN + ["-np", "2", sys.executable, os.path.abspath(__file__),
                     "--packed", lib,
                     os.path.join(llama_model, "model.safetensors"),
                     h.workdir, os.path.join(bindir, "..", "lib",
                                             "libtfcrt.so")],
        capture_output=True, text=True, timeout=120)
    lines = done.stdout.strip().splitlines()
    expected = [
        "packed_weights: the 2 ranks of a tensor-parallel model pack "
        "different parts of the weights, which one file does not hold",
        "save_packed_weights: model %s: built for 2 ranks (tfc-compile "
        "--tensor-parallel=2): each rank packs its own part of the "
        "weights, which a packed weights file does not hold" % lib,
        "load_packed_weights: model %s: built for 2 ranks (tfc-compile "
        "--tensor-parallel=2): each rank packs its own part of the "
        "weights, which a packed weights file does not hold" % lib]
    h.expect("tfc.Model(packed_weights=...), save_packed_weights and "
             "load_packed_weights of the 2-rank build refused (rank 0: %s; "
             "stderr %s)" % (lines, done.stderr.strip()[-300:]),
             done.returncode == 0 and lines == expected)
    h.expect("no packed weights file written",
             not os.path.exists(h.path("rank.packed")))


def packed_rank(lib, weights, workdir, runtime):
    """One rank of check_errors' packed weights checks: rank 0 prints each
    error, a line each."""
    sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "python"))
    import tfc
    path = os.path.join(workdir, "rank.packed")
    lines = []
    try:
        tfc.Model(lib, weights=weights, runtime=runtime, packed_weights=path)
    except tfc.Error as e:
        lines.append(str(e))
    m = tfc.Model(lib, weights=weights, runtime=runtime)
    m.run(np.zeros((BATCH, 4), np.int64), np.ones((BATCH, 4), np.int64))
    for method in ("save_packed_weights", "load_packed_weights"):
        try:
            getattr(m, method)(path)
        except tfc.Error as e:
            lines.append("%s: %s" % (method, e))
    if m.rank == 0:
        print("\n".join(lines))


def main():
    if sys.argv[1] == "--packed":
        packed_rank(*sys.argv[2:6])
        return
    h, rng, _ = start(sys.argv[1:])
    layers = tp.LLAMA["num_hidden_layers"]
    check_quantized(h, rng, "llama_g", LLAMA_G, llama.write_model, layers)
    check_quantized(h, rng, "gpt2_g", GPT2_G, gpt2.write_model,
                    tp.GPT2["n_layer"])
    check_rank_scales(
        h, rng, "llama_q", tp.LLAMA, llama.write_model, llama.reference,
        lambda x, w, bits: x["lm_head.weight"], 1,
        ("_proj.weight", "lm_head.weight"),
        ("o_proj.weight", "down_proj.weight"))
    check_rank_scales(
        h, rng, "gpt2_q", tp.GPT2, gpt2.write_model, gpt2.reference,
        lambda x, w, bits: quantized_weight(w["transformer.wte.weight"], 1,
                                            bits), 0,
        ("c_attn.weight", "c_proj.weight", "c_fc.weight"),
        ("c_proj.weight",))
    llama_model = check_checkpoint_types(h, rng, "llama", tp.LLAMA,
                                         llama.write_model, layers)
    gpt_model = check_checkpoint_types(h, rng, "gpt2", tp.GPT2,
                                       gpt2.write_model, tp.GPT2["n_layer"])
    check_sizes(h, rng, "llama", tp.LLAMA, llama_model, layers,
                tp.LLAMA["num_key_value_heads"],
                tp.LLAMA["hidden_size"] // tp.LLAMA["num_attention_heads"])
    check_sizes(h, rng, "gpt2", tp.GPT2, gpt_model, tp.GPT2["n_layer"],
                tp.GPT2["n_head"], tp.GPT2["n_embd"] // tp.GPT2["n_head"])
    check_errors(h, rng, llama_model, gpt_model)
    h.finish()


if __name__ == "__main__":
    main()
