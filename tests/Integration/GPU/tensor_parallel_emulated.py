"""Tensor parallelism on the GPU (tfc-compile --target=nvptx
--tensor-parallel=2, docs/tensor-parallel.md) without a GPU: the kernels
run in the fake CUDA driver's PTX interpreter (TFC_CUDA_DRIVER, %ptx_cuda)
and the all-reduces in the fake NCCL (TFC_NCCL_LIBRARY, over MPI). A
LLaMA with grouped-query attention and a GPT-2 built for 2 ranks and run
by `mpirun -np 2` give the outputs of the 1-rank GPU build within 1e-5
(norm-wise relative), and its logits those of the float64 reference: a
prefill (a padded row) with the KV cache, fused and (LLaMA) unfused, in
f16 within 10 units of its roundoff, and with the vocabulary replicated
instead of split (the split: the all-gather and the rank, over a
vocabulary of 101 rows, the last rank's part padded); and a one-token decode step
on the 1-rank build's cache. tfc.Generator(device="gpu",
tensor_parallel=2) under `mpirun -np 2` (the KV cache on each rank's
device) generates the 1-rank CPU Generator's tokens, greedy and beam
search. Errors, one line and
exit 1 each: the NCCL library missing, a rank that stops calling the
all-reduce (TFC_COLLECTIVE_TIMEOUT), a TFC_DEVICE that names no device.
And the fake NCCL fails as NCCL does (fake_nccl_checks.py).

The 2-rank build and run helpers are tensor-parallel.py's (the CPU test).

usage: tensor_parallel_emulated.py BINDIR WORKDIR FAKE_NCCL
       tensor_parallel_emulated.py --generate WORKDIR  (each MPI rank)
"""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CPU = os.path.join(HERE, "..", "CPU")
sys.path.insert(0, CPU)
import gpt2  # noqa: E402
import llama  # noqa: E402
sys.path.insert(0, os.path.join(HERE, "..", "..", "pylib"))
from tfc_testing.arrays import random_tokens  # noqa: E402
from tfc_testing.harness import start  # noqa: E402
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "python"))
import tfc  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "tensor_parallel", os.path.join(CPU, "tensor-parallel.py"))
tp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tp)

GPU = ["--target=nvptx", "--gpu-binary=ptx"]
SEQ = 5  # the PTX interpreter is slow: few tokens
LLAMA = dict(tp.LLAMA)  # 4 heads on 2 K/V heads, MLP width 100
GPT2 = dict(tp.GPT2)  # 4 heads, MLP width 4 * 48


def check_model(h, rng, name, cfg, write, reference, head, layers, unfused):
    model = h.path(name)
    w = write(model, rng, cfg)
    ids, mask = random_tokens(rng, cfg["vocab_size"], tp.BATCH, SEQ,
                              padding=2)
    outputs = 1 + 2 * layers
    labels = ["logits"] + ["present.%d.%s" % (l, kv) for l in range(layers)
                           for kv in ("key", "value")]

    def both(tag, flags, inputs, tol=1e-5):
        """The 1-rank and the 2-rank GPU build of `flags` on `inputs`:
        every output of the second within `tol` of the first's. Returns
        both builds' outputs."""
        got = {}
        for ranks in (1, 2):
            lib = tp.build(h, model, "%s_%s" % (name, tag), ranks,
                           flags + GPU + ["--output=logits"])
            got[ranks], _ = tp.run(h, lib, model, inputs, outputs,
                                   "%s_%s_%d" % (name, tag, ranks), ranks)
        for label, two, one in zip(labels, got[2], got[1]):
            h.expect_close("%s %s %s: 2 ranks (NCCL)" % (name, tag, label),
                           two, one, tol)
        return got

    prefill = ["--seq-len", str(SEQ), "--kv-cache"]
    got = both("prefill", prefill, [ids, mask])
    ref = reference(cfg, w, ids, mask) @ w[head].astype(np.float64).T
    h.expect_close("%s prefill logits: 2 ranks against float64" % name,
                   got[2][0], ref, 1e-5)
    if unfused:
        both("prefill_unfused", prefill + ["--no-fusion"], [ids, mask])
        # f16: the partial products are summed in f32 and rounded once, but
        # in another order than one rank's, which can round a value the
        # other way, a unit the layers after carry on: within f16's model
        # tolerance (10 units of its roundoff).
        both("prefill_f16", prefill + ["--dtype=f16"], [ids, mask],
             10 * 2.0**-11)
        # The token embeddings and the LM head whole on every rank.
        both("prefill_replicated",
             prefill + ["--tensor-parallel-vocab=replicate"], [ids, mask])
    # One token after the prefill, on the 1-rank build's cache.
    step_ids = rng.integers(0, cfg["vocab_size"], (tp.BATCH, 1))
    step_mask = np.concatenate([mask, np.ones((tp.BATCH, 1), np.int64)], 1)
    both("decode", ["--seq-len", "1", "--past-len", str(SEQ)],
         [step_ids.astype(np.int64), step_mask] + got[1][1:])
    return model, ids, mask


# Generation: the prompt's batch and length, the tokens generated.
GEN_BATCH, GEN_PROMPT, GEN_NEW = 2, 4, 3


def generate(model, ids, mask, **flags):
    """Greedy and 2-beam tokens of tfc.Generator(model, **flags)."""
    with tfc.Generator(model, GEN_PROMPT + GEN_NEW, batch=GEN_BATCH,
                       **flags) as g:
        return g.rank, [np.asarray(g.generate(ids, mask,
                                              max_new_tokens=GEN_NEW,
                                              num_beams=beams)).tolist()
                        for beams in (1, 2)]


def generate_rank(work):
    """One rank of check_generation: the GPU Generator split across the
    job's 2 ranks; rank 0 writes its tokens."""
    inputs = np.load(os.path.join(work, "gen_inputs.npz"))
    rank, tokens = generate(os.path.join(work, "gen_llama"), inputs["ids"],
                            inputs["mask"], device="gpu", tensor_parallel=2,
                            extra_args=["--gpu-binary=ptx"])
    if rank == 0:
        with open(os.path.join(work, "gen_tokens.json"), "w") as f:
            json.dump(tokens, f)


def check_generation(h, rng):
    model = h.path("gen_llama")
    llama.write_model(model, rng, LLAMA)
    ids = rng.integers(0, LLAMA["vocab_size"], (GEN_BATCH, GEN_PROMPT))
    mask = np.ones((GEN_BATCH, GEN_PROMPT), np.int64)
    mask[1, 0] = 0  # the second prompt left-padded
    np.savez(h.path("gen_inputs.npz"), ids=ids, mask=mask)
    _, want = generate(model, ids, mask)
    done = subprocess.run(tp.MPIRUN + ["-np", "2", sys.executable,
                                       os.path.abspath(__file__),
                                       "--generate", h.workdir],
                          capture_output=True, text=True, timeout=300)
    got = None
    if done.returncode == 0:
        with open(h.path("gen_tokens.json")) as f:
            got = json.load(f)
    h.expect("Generator(device=\"gpu\", tensor_parallel=2): greedy and "
             "beam tokens %s as the 1-rank CPU Generator's %s (exit %d%s)" % (
                 got, want, done.returncode,
                 done.stderr.strip()[-300:] and ": " +
                 done.stderr.strip()[-300:]),
             done.returncode == 0 and got == want)


def check_errors(h, model, ids, mask):
    lib = tp.build(h, model, "llama_errors", 2, ["--seq-len", str(SEQ)] + GPU)
    args = tp.run_args(h, lib, model, ids, mask)
    tp.one_line_error(h, "TFC_NCCL_LIBRARY missing",
                      tp.MPIRUN + ["-np", "2"] + args,
                      "cannot open the NCCL library /nonexistent/libnccl.so.2 "
                      "(a tensor-parallel model on the GPU needs NCCL; "
                      "TFC_NCCL_LIBRARY names another)",
                      env={"TFC_NCCL_LIBRARY": "/nonexistent/libnccl.so.2"})
    # The device: TFC_DEVICE, else the rank on this machine.
    tp.one_line_error(h, "TFC_DEVICE not a number", args[:1] + [
        h.path("llama_prefill_tp1.so")] + args[2:],
        "target nvptx needs a CUDA driver: CUDA driver %s: TFC_DEVICE=one: "
        "expected a device ordinal" % os.environ["TFC_CUDA_DRIVER"],
        env={"TFC_DEVICE": "one"})
    # Rank 1 runs a 1-block build of the same widths: after its 2
    # all-reduces it stops, and rank 0 waits for its third until the time
    # limit (TFC_COLLECTIVE_TIMEOUT, 2 s), then aborts the communicator.
    short = h.path("llama_1block")
    llama.write_model(short, np.random.default_rng(4),
                      dict(LLAMA, num_hidden_layers=1))
    short_lib = tp.build(h, short, "llama_1block", 2,
                         ["--seq-len", str(SEQ)] + GPU)
    short_args = [h.run_tool, short_lib, "--weights",
                  os.path.join(short, "model.safetensors")] + args[4:]
    tp.one_line_error(h, "a rank that stops calling the all-reduce (NCCL)",
                      tp.MPIRUN + ["-np", "1"] + args + [":", "-np", "1"] +
                      short_args,
                      "an all-reduce of %d floats did not complete within "
                      "2 s (TFC_COLLECTIVE_TIMEOUT): another of the 2 ranks "
                      "did not join it" % (tp.BATCH * SEQ *
                                           LLAMA["hidden_size"]),
                      env={"TFC_COLLECTIVE_TIMEOUT": "2"})


def check_fake_nccl(h, library):
    """fake_nccl_checks.py on 2 ranks: the fake NCCL fails as NCCL does."""
    done = subprocess.run(tp.MPIRUN + ["-np", "2", sys.executable,
                                       os.path.join(HERE,
                                                    "fake_nccl_checks.py"),
                                       library],
                          capture_output=True, text=True, timeout=120)
    print(done.stdout.rstrip())
    h.expect("the fake NCCL's checks (exit %d)" % done.returncode,
             done.returncode == 0 and "19 passed, 0 failed" in done.stdout)


def main():
    if sys.argv[1] == "--generate":
        return generate_rank(sys.argv[2])
    h, rng, _ = start(sys.argv[1:3])
    # mpirun's ranks inherit the environment.
    os.environ["TFC_NCCL_LIBRARY"] = sys.argv[3]
    check_fake_nccl(h, sys.argv[3])
    model, ids, mask = check_model(h, rng, "llama", LLAMA, llama.write_model,
                                   llama.reference, "lm_head.weight",
                                   LLAMA["num_hidden_layers"], True)
    check_model(h, rng, "gpt2", GPT2, gpt2.write_model, gpt2.reference,
                "transformer.wte.weight", GPT2["n_layer"], False)
    check_generation(h, rng)
    check_errors(h, model, ids, mask)
    h.finish()


if __name__ == "__main__":
    main()
