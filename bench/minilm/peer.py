#!/usr/bin/env python3
"""One peer of the MiniLM benchmark, in its own process (run.py starts it
under /usr/bin/time -v, so its peak RSS is this process alone).

  peer.py export --model-dir D --batch B --seq-len S --onnx OUT.onnx
  peer.py quantize --model-dir D --onnx IN.onnx --out OUT.onnx
  peer.py torch|ort --model-dir D --onnx F --ids IDS.npy --mask MASK.npy
          --threads T --warmup W --runs N --emb OUT.npy --stats OUT.json

ort runs any .onnx file whose inputs are the ids and the mask, in that
order (bench/onnx/run.py's files too), and writes its first output; its
stats include the time the InferenceSession took to create (session_ms).

The computation is the same for every system: all-MiniLM-L6-v2 as
sentence-transformers defines it (BertModel -> mean pooling over the
attention mask -> L2 normalise) on int64 [B, S] ids + mask, token_type_ids 0,
output float32 [B, 384]. Tokenisation is not timed (tfc gets token ids too).

  torch: the SentenceTransformer module's own forward (its Transformer,
         Pooling and Normalize modules) on the padded tensors, under
         torch.inference_mode(), torch.set_num_threads(T).
  ort:   that same forward exported by torch.onnx.export (the dynamo
         exporter, operator set 18; pooling and normalise inside the graph,
         static shapes [B, S] like tfc's; the weights in the external
         data file next to it),
         CPUExecutionProvider, ORT_ENABLE_ALL, intra_op_num_threads=T,
         inter_op_num_threads=1, sequential execution.
  quantize: ONNX Runtime's dynamic quantization of that export
         (onnxruntime.quantization.quantize_dynamic, its defaults: int8
         weights per tensor, activations quantized to uint8 at run time),
         what a user of ONNX Runtime runs to serve an encoder in int8.
"""
import argparse
import json
import resource
import sys
import time


def rss_kib():
    # Current RSS (VmRSS) of this process, KiB.
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def load_st(model_dir):
    import torch
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(0)
    m = SentenceTransformer(model_dir, device="cpu")
    m.eval()
    return m


def make_wrapper(st):
    """(ids, mask) -> sentence_embedding, through SentenceTransformer.forward."""
    import torch

    class W(torch.nn.Module):
        def __init__(self, st):
            super().__init__()
            self.st = st

        def forward(self, input_ids, attention_mask):
            out = self.st({
                "input_ids": input_ids,
                "attention_mask": attention_mask,
                "token_type_ids": torch.zeros_like(input_ids),
            })
            return out["sentence_embedding"]

    return W(st).eval()


def export_onnx(w, batch, seq_len, path, opset):
    """Exports make_wrapper's module w for [batch, seq_len] inputs."""
    import torch

    ids = torch.ones(batch, seq_len, dtype=torch.int64)
    mask = torch.ones(batch, seq_len, dtype=torch.int64)
    with torch.no_grad():
        torch.onnx.export(w, (ids, mask), path, dynamo=True,
                          input_names=["input_ids", "attention_mask"],
                          output_names=["sentence_embedding"],
                          opset_version=opset)
    print(f"exported {path} (opset {opset}, static [{batch}, {seq_len}])")


def do_export(a):
    export_onnx(make_wrapper(load_st(a.model_dir)), a.batch, a.seq_len, a.onnx, a.opset)


def do_quantize(a):
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(a.onnx, a.out, weight_type=QuantType.QInt8)
    print(f"quantized {a.onnx} -> {a.out} (quantize_dynamic, int8 weights)")


def time_loop(fn, warmup, runs):
    for _ in range(warmup):
        fn()
    times = []
    out = None
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return out, times


def do_bench(a):
    import numpy as np

    stats = {"system": a.cmd, "threads": a.threads}
    ids = np.load(a.ids)
    mask = np.load(a.mask)
    if a.cmd in ("torch", "torch-bf16"):
        import torch

        torch.set_num_threads(a.threads)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:
            pass
        stats["rss_after_import_kib"] = rss_kib()
        w = make_wrapper(load_st(a.model_dir))
        if a.cmd == "torch-bf16":
            w = w.to(torch.bfloat16)
        t_ids, t_mask = torch.from_numpy(ids), torch.from_numpy(mask)

        def fn():
            with torch.inference_mode():
                return w(t_ids, t_mask)

        out, times = time_loop(fn, a.warmup, a.runs)
        emb = out.float().numpy()
        stats["torch_num_threads"] = torch.get_num_threads()
        stats["version"] = torch.__version__
    else:
        import onnxruntime as ort

        stats["rss_after_import_kib"] = rss_kib()
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = a.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        t0 = time.perf_counter()
        sess = ort.InferenceSession(a.onnx, so, providers=["CPUExecutionProvider"])
        stats["session_ms"] = (time.perf_counter() - t0) * 1e3
        # The graph's inputs in order: the ids, then the mask (a graph of
        # one input, e.g. pixel values given as --ids, takes the first).
        feeds = dict(zip([i.name for i in sess.get_inputs()], (ids, mask)))

        def fn():
            return sess.run(None, feeds)[0]

        out, times = time_loop(fn, a.warmup, a.runs)
        emb = out
        stats["providers"] = sess.get_providers()
        stats["version"] = ort.__version__
    np.save(a.emb, np.ascontiguousarray(emb, dtype=np.float32))
    stats["times_ms"] = times
    stats["peak_rss_self_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with open(a.stats, "w") as f:
        json.dump(stats, f)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("cmd", choices=["export", "quantize", "torch", "torch-bf16",
                                   "ort"])
    p.add_argument("--model-dir", help="the model (export, quantize, torch)")
    p.add_argument("--onnx")
    p.add_argument("--out")
    p.add_argument("--opset", type=int, default=18)
    p.add_argument("--batch", type=int)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--ids")
    p.add_argument("--mask")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--emb")
    p.add_argument("--stats")
    a = p.parse_args()
    if a.cmd == "export":
        do_export(a)
    elif a.cmd == "quantize":
        do_quantize(a)
    else:
        do_bench(a)


if __name__ == "__main__":
    sys.exit(main())
