"""A decode loop with its KV cache on the device, on the PTX interpreter:
the GPT-2 decoder of gpt2.py built for one-token steps over a fixed cache
(--past-len C --seq-len 1 --position-ids --present=new), its caches device
tensors that each step's new keys and values are copied into on the
device (tfc.device), its outputs left on the device. Run with CUDA graphs
(captured on the first step, replayed on the others) and kernel by
kernel: the hidden states and keys and values must be the same bits, and
match the float64 model of the whole sequence.

usage: gpt2_graphs.py BINDIR WORKDIR LIBTFCRT [SEED]
  $TFC_CUDA_DRIVER: the PTX interpreter's driver (ptx_cuda.so)
"""

import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "CPU"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "pylib"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "runtime", "python"))
import tfc_runtime as tfc  # noqa: E402
from gpt2 import CFG, reference, write_model  # noqa: E402
from tfc_testing.arrays import random_tokens  # noqa: E402
from tfc_testing.harness import start  # noqa: E402

BATCH, SEQ = 2, 9


def decode(lib, weights, rt, graphs, ids, mask):
    """Runs every step of the sequence; returns the hidden states, each
    step's new keys and values (host copies) and the graph counters."""
    b, cap = ids.shape[0], ids.shape[1] - 1
    heads = CFG["n_head"]
    d = CFG["n_embd"] // heads
    with tfc.Model(lib, weights, runtime=rt) as m:
        m.set_cuda_graphs(graphs)
        caches = [m.to_device(np.zeros((b, heads, cap, d), np.float32))
                  for _ in range(2 * CFG["n_layer"])]
        hidden, kv = [], []
        for n in range(ids.shape[1]):
            step_mask = np.zeros((b, cap + 1), np.int64)
            step_mask[:, :n] = mask[:, :n]
            step_mask[:, cap] = mask[:, n]
            outs = m.run(ids[:, n:n + 1], step_mask,
                         np.full((b, 1), n, np.int64), *caches,
                         outputs_on_device=True)
            hidden.append(outs[0].numpy())
            kv.append([o.numpy() for o in outs[1:]])
            if n == cap:
                break
            # Slot n of every (sequence, head) row of each cache.
            for cache, new in zip(caches, outs[1:]):
                for row in range(b * heads):
                    cache.copy_from(new, nbytes=4 * d,
                                    offset=4 * d * (row * cap + n),
                                    src_offset=4 * d * row)
        return hidden, kv, m.cuda_graph_stats()


def main():
    h, rng, _ = start(sys.argv[1:3] + sys.argv[4:] +
                      ["--target=nvptx", "--gpu-binary=ptx"])
    rt = tfc.load_runtime(sys.argv[3])
    model = h.path("gpt2_graphs")
    w = write_model(model, rng, CFG)
    ids, mask = random_tokens(rng, CFG["vocab_size"], BATCH, SEQ, 3)
    kv_ref = []
    ref = reference(CFG, w, ids, mask, kv_ref)
    lib, _ = h.build_hf("gpt2_graphs", model, BATCH, 1, True,
                        ["--past-len=%d" % (SEQ - 1), "--position-ids",
                         "--present=new"])
    weights = os.path.join(model, "model.safetensors")
    runs = {g: decode(lib, weights, rt, g, ids, mask) for g in (True, False)}
    (hg, kvg, on), (hp, kvp, off) = runs[True], runs[False]
    h.expect("graphs: captured on the first step, replayed on the %d others "
             "(%s)" % (SEQ - 1, on),
             on["captures"] == 1 and on["replays"] == SEQ - 1 and
             on["plain_runs"] == 0 and on["off"] == "")
    h.expect("no graphs: %d steps kernel by kernel (%s)" % (SEQ, off),
             off["plain_runs"] == SEQ and off["captures"] == 0)
    h.expect("graph replay and launches give the same bits, every step",
             all(np.array_equal(x, y) for x, y in zip(hg, hp)) and
             all(np.array_equal(x, y) for s, t in zip(kvg, kvp)
                 for x, y in zip(s, t)))
    for n in range(SEQ):
        h.expect_close("step %d: hidden state" % n, hg[n], ref[:, n:n + 1],
                       1e-4)
        h.expect_close("step %d: new keys and values" % n,
                       np.concatenate([o.ravel() for o in kvg[n]]),
                       np.concatenate([t[:, :, n].ravel() for pair in kv_ref
                                       for t in pair]), 1e-4)
    h.finish()


if __name__ == "__main__":
    main()
