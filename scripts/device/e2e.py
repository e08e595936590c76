"""Whole models against PyTorch in the device check (phase "e2e"):
all-MiniLM-L6-v2 in f16 (batch 8 x 128; its build and weights are
minilm.py's), a GPT-2 124M prefill (f16, batch 4 x 512) and a decode step
of a LLaMA of Llama-3.2-1B's shape (f16, batch 1, one token after a cache
of 1023; tfc: --past-len 1023 --present=new, the new token's keys and
values returned, the cache not copied), each against PyTorch eager and
torch.compile: inductor's default mode for the two prefills, and for the
decode step transformers' LlamaModel with a StaticCache under
torch.compile(mode="reduce-overhead") (CUDA graphs), as transformers
advises.

The GPT-2 and LLaMA weights do not travel (0.25 and 2.5 GB in f16):
prepare compiles each from a config and a safetensors file whose header
names every tensor and whose data are a hole (tfc-compile reads the
header), and the run draws the weights from the seed with transformers'
own initialisation, on the GPU, and writes them for tfc-run. tfc's output
is checked against PyTorch's eager f16 model run in f32 (the same f16
weights) within 10 units of f16's roundoff, norm-wise.

Each timing row says what it times. tfc: `tfc-run --repeat`, CUDA events
around the model's launches from an idle stream, inputs already on the
device: end to end, the host's launches included. PyTorch: CUDA events
around each call from an idle stream (end to end, Python and the
launches included), and the same calls queued behind a sleeping kernel
(kernel-to-kernel: the GPU's time only).

The dry run (the CPU): tiny configs, float32 PyTorch, torch.compile with
the aot_eager backend (a smoke test of this code, not a timing).
"""

import json
import os
import struct

import numpy as np

import minilm

HERE = os.path.dirname(os.path.abspath(__file__))
DIR = "e2e"
F16_TOL = 10 * 2.0**-11

GPT2_124M = {"architectures": ["GPT2Model"], "model_type": "gpt2",
             "n_layer": 12, "n_embd": 768, "n_head": 12, "n_inner": None,
             "n_positions": 1024, "n_ctx": 1024, "vocab_size": 50257,
             "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
             "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
LLAMA_1B = {"architectures": ["LlamaModel"], "model_type": "llama",
            "hidden_size": 2048, "num_hidden_layers": 16,
            "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 64, "intermediate_size": 8192, "vocab_size": 128256,
            "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
            "rope_theta": 500000.0, "hidden_act": "silu",
            "rope_scaling": {"rope_type": "llama3", "factor": 32.0,
                             "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 8192},
            "attention_bias": False, "mlp_bias": False,
            "tie_word_embeddings": True}


class Model:
    """One whole model: its config, shapes and tfc-compile flags."""

    def __init__(self, name, cfg, batch, seq, past=0, small=None):
        self.name, self.cfg, self.batch, self.seq = name, cfg, batch, seq
        self.past, self.small = past, small
        self.lib = os.path.join("models", "e2e_%s.so" % name)

    def shrunk(self):
        """The dry run's tiny version of the model."""
        cfg, batch, seq, past = self.small
        return Model(self.name, dict(self.cfg, **cfg), batch, seq, past)

    def flags(self):
        f = ["--batch", str(self.batch), "--seq-len", str(self.seq),
             "--dtype=f16"]
        if self.past:
            f += ["--past-len=%d" % self.past, "--present=new"]
        return f


MODELS = [
    Model("gpt2_124m_prefill", GPT2_124M, 4, 512, small=(
        {"n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 300,
         "n_positions": 64}, 2, 32, 0)),
    Model("llama_1b_decode", LLAMA_1B, 1, 1, past=1023, small=(
        {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 160,
         "vocab_size": 300}, 1, 1, 31)),
]


def shapes(model, prefix=""):
    """{name: shape} of the tensors tfc imports for `model`'s config (the
    names of transformers' GPT2Model and LlamaModel; a LLaMA's with
    `prefix` "model.": LlamaForCausalLM's)."""
    import sys
    sys.path.append(os.path.join(HERE, "..", "..", "tests", "Integration",
                                 "CPU"))
    import gpt2
    import llama
    cfg = model.cfg
    if cfg["model_type"] == "llama":
        saved = llama.random_weights
        llama.random_weights = lambda rng, w, tables: dict(w)
        try:
            return llama.weights(None, dict(llama.CFG, **cfg), prefix)
        finally:
            llama.random_weights = saved

    class Zeros:  # shapes only: every tensor 0 (no draws)
        @staticmethod
        def standard_normal(shape):
            return np.zeros(shape, dtype=np.float32)
    w = gpt2.weights(Zeros, dict(gpt2.CFG, **cfg), "")
    return {k: v.shape for k, v in w.items()}


def write_header_only(path, tensors):
    """A safetensors file of f16 `tensors` ({name: shape}) whose data are a
    hole: the header is what tfc-compile reads."""
    header, offset = {}, 0
    for name, shape in tensors.items():
        n = 2 * int(np.prod(shape))
        header[name] = {"dtype": "F16", "shape": list(shape),
                        "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        f.truncate(8 + len(text) + offset)


def prepare(tfc_compile, out, target, gpu_flags, work, small):
    """Compiles each model into out/models/e2e_NAME.so and writes
    out/e2e/NAME.json (config, shapes, names); {name: error line or
    "ok"}."""
    status = {}
    import shutil
    shutil.rmtree(os.path.join(out, DIR), ignore_errors=True)
    for model in MODELS:
        model = model.shrunk() if small else model
        src = os.path.join(work, model.name)
        os.makedirs(src, exist_ok=True)
        with open(os.path.join(src, "config.json"), "w") as f:
            json.dump(model.cfg, f)
        tensors = shapes(model)
        write_header_only(os.path.join(src, "model.safetensors"), tensors)
        err = minilm.compile_hf(tfc_compile, src, model.batch, model.seq,
                                os.path.join(out, model.lib), target,
                                gpu_flags + model.flags()[4:])
        if not err:
            os.makedirs(os.path.join(out, DIR), exist_ok=True)
            with open(os.path.join(out, DIR, model.name + ".json"), "w") as f:
                json.dump({"cfg": model.cfg, "batch": model.batch,
                           "seq": model.seq, "past": model.past,
                           "lib": model.lib,
                           "tensors": {k: list(v) for k, v in
                                       tensors.items()}}, f)
        status[model.name] = err or "ok"
    return status


def static_cache(cfg, batch, length, device, dtype):
    """transformers' StaticCache of `length` tokens (its signature by
    version: 4.x takes the batch, device and dtype; 5.x the config and the
    length)."""
    from transformers import StaticCache
    try:
        return StaticCache(config=cfg, max_batch_size=batch,
                           max_cache_len=length, device=device, dtype=dtype)
    except TypeError:
        return StaticCache(config=cfg, max_cache_len=length)


def cache_layer(cache, layer):
    """(keys, values) of one layer of a filled StaticCache."""
    if hasattr(cache, "layers"):
        return cache.layers[layer].keys, cache.layers[layer].values
    return cache.key_cache[layer], cache.value_cache[layer]


def hf_model(spec, device, dtype, seed):
    """transformers' model of the config's architecture (GPT2Model,
    LlamaModel, LlamaForCausalLM), initialised by transformers from `seed`
    on `device`, in `dtype`."""
    import torch
    import transformers
    cfg = dict(spec["cfg"])
    arch = cfg.pop("architectures")[0]
    config = transformers.AutoConfig.for_model(**cfg)
    torch.manual_seed(seed)
    with torch.device(device):
        model = getattr(transformers, arch)(config)
    return model.to(dtype).eval(), config


def write_weights(model, spec, path):
    """The model's tensors that tfc imports, in f16, as safetensors."""
    import torch
    from tfc_testing import safetensors_file
    state = model.state_dict()
    missing = [k for k in spec["tensors"] if k not in state]
    if missing:
        raise RuntimeError("transformers' model lacks %s" %
                           ", ".join(missing[:3]))
    safetensors_file.write_arrays(path, {
        k: state[k].detach().to(torch.float16).cpu().numpy()
        for k in spec["tensors"]})


def torch_times(fn, gpu, target_s):
    """(end-to-end ms, kernel-to-kernel ms) medians of fn(): CUDA events
    around each call from an idle stream; the same calls queued behind a
    sleeping kernel, as many per sleep as Python issues in its time."""
    import time

    from common import once_ms, queued_times
    for _ in range(3):
        fn()
    e2e = sorted(once_ms(fn, gpu) for _ in range(5))[2]
    n = int(min(100, max(5, target_s * 1e3 / max(e2e, 1e-3))))
    e2e = sorted(once_ms(fn, gpu) for _ in range(n))[n // 2]
    if not gpu:
        return e2e, None
    t = time.perf_counter()
    fn()  # the host's time to issue one call
    host_ms = (time.perf_counter() - t) * 1e3
    queued = max(1, min(50, int(20 / max(host_ms, 1e-3))))
    k2k = sorted(queued_times(fn, n, gpu, queued=queued))[n // 2]
    return e2e, k2k


def check(base, run, device, work, checks, clock, rows, seed):
    """Each prepared model: tfc's time and output, PyTorch eager and
    compiled; one row per model in `rows`."""
    import glob
    for path in sorted(glob.glob(os.path.join(base, DIR, "*.json"))):
        with open(path) as f:
            spec = json.load(f)
        name = os.path.basename(path)[:-5]
        row = {"name": name, "notes": []}
        rows.append(row)
        if clock.left() < 90:
            row["notes"].append("%s skipped: time budget spent" % name)
            checks.add(False, "e2e %s" % name, "not run: time budget spent")
            continue
        try:
            one_model(name, spec, base, run, device, work, checks, clock, row,
                      seed)
        except Exception as e:  # a bug here must not end the whole check
            checks.add(False, "e2e %s" % name, "check.py error: %s: %s" %
                       (type(e).__name__, str(e).splitlines()[0][:200]
                        if str(e) else ""))
    if os.path.isdir(os.path.join(base, minilm.DIR)) and \
            os.path.exists(os.path.join(base, minilm.LIB16)):
        row = {"name": "minilm_f16", "notes": []}
        rows.append(row)
        try:
            minilm_row(base, run, device, work, checks, clock, row)
        except Exception as e:  # a bug here must not end the whole check
            checks.add(False, "e2e minilm_f16", "check.py error: %s: %s" %
                       (type(e).__name__, e))


def compiled(fn, gpu, mode=None):
    """torch.compile of fn: inductor on the GPU (in `mode`), aot_eager on
    the CPU (the dry run's smoke test)."""
    import torch
    if not gpu:
        return torch.compile(fn, backend="aot_eager")
    return torch.compile(fn, mode=mode) if mode else torch.compile(fn)


def decode_step(forward, cache, ids, past, s, model=None):
    """A call of one decode step of `forward` (the model, or its compiled
    form) after `past` tokens in the StaticCache `cache`, the new tokens
    written over the same slots at every call: transformers 4.x takes
    their positions (cache_position), 5.x counts them (the cache is
    cropped back)."""
    import inspect

    import torch
    takes = "cache_position" in inspect.signature(
        (model or forward).forward).parameters
    where = torch.arange(past, past + s, device=ids.device)
    extra = {"cache_position": where} if takes else {}

    def call():
        if not takes and int(cache.get_seq_length()) > past:
            cache.crop(-s)
        return forward(input_ids=ids[:, past:], past_key_values=cache,
                       position_ids=where[None].expand(ids.shape[0], s),
                       use_cache=True, **extra).last_hidden_state
    return call


def time_peers(row, eager, gpu, mode=None, fast=None):
    """PyTorch eager and compiled (`fast`, or torch.compile of `eager`) on
    the row: {eager,compiled}_{e2e,k2k}."""
    import time

    import torch
    target = 0.3 if gpu else 0.05
    with torch.no_grad():
        row["eager_e2e"], row["eager_k2k"] = torch_times(eager, gpu, target)
        t = time.perf_counter()
        fast = fast or compiled(eager, gpu, mode)
        fast()
        row["compile_s"] = time.perf_counter() - t
        row["compiled_e2e"], row["compiled_k2k"] = torch_times(fast, gpu,
                                                              target)
    row["compiled_as"] = ("inductor" + (" " + mode if mode else "")
                          if gpu else "aot_eager (CPU smoke test)")


def one_model(name, spec, base, run, device, work, checks, clock, row,
              seed):
    import torch

    from common import load_output, median_ms, save_tensor
    gpu = device.type == "cuda"
    dtype = torch.float16 if gpu else torch.float32
    model, config = hf_model(spec, device, dtype, seed)
    weights = os.path.join(work, name + ".safetensors")
    write_weights(model, spec, weights)
    b, s, past = spec["batch"], spec["seq"], spec["past"]
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    ids = torch.randint(0, config.vocab_size, (b, past + s), generator=gen,
                        device=device)
    mask = torch.ones(b, past + s, dtype=torch.int64, device=device)
    inputs = [ids[:, past:], mask]
    fast = None
    with torch.no_grad():
        if past:
            cache = static_cache(config, b, past + s, device, dtype)
            model(input_ids=ids[:, :past], past_key_values=cache,
                  use_cache=True)
            for layer in range(config.num_hidden_layers):
                inputs += [t[:, :, :past] for t in cache_layer(cache, layer)]
            eager = decode_step(model, cache, ids, past, s)
            fast = decode_step(compiled(model, gpu, "reduce-overhead"),
                               cache, ids, past, s, model)
        else:
            def eager():
                return model(input_ids=ids,
                             attention_mask=mask).last_hidden_state
        expect = eager().float()
    paths = []
    for i, t in enumerate(inputs):
        paths.append(os.path.join(work, "e%d.npy" % i))
        save_tensor(t.to(torch.float16) if t.is_floating_point() else t,
                    paths[-1])
    outs = [os.path.join(work, "e_out%d.npy" % i)
            for i in range(1 + (2 * config.num_hidden_layers if past else 0))]
    stdout, err = run(os.path.join(base, spec["lib"]), paths, outs,
                      timeout=min(180, clock.left() - 30),
                      repeat=20 if gpu else 2, warmup=3 if gpu else 1,
                      weights=weights, build="e2e")
    label = "e2e %s tfc vs transformers eager %s" % (
        name, "f16" if gpu else "f32")
    if err:
        checks.add(False, label, err)
    else:
        row["tfc_ms"] = median_ms(stdout)
        got = load_output(outs[0], "f16", device)
        rel = float(torch.linalg.norm(got - expect) /
                    torch.linalg.norm(expect))
        finite = bool(torch.isfinite(got).all())
        checks.add(finite and rel <= F16_TOL, label,
                   "rel.err %.2e (tol %.1e)%s" % (
                       rel, F16_TOL, "" if finite else ", NON-FINITE"))
    time_peers(row, eager, gpu, "reduce-overhead" if past else None, fast)
    print("time e2e %-24s tfc %s ms; eager %s / %s ms, compiled %s / %s ms "
          "(end-to-end / kernel-to-kernel; compiled in %.0f s)" % (
              name, row.get("tfc_ms"), *(
                  "%.3f" % row[k] if row.get(k) else "—" for k in
                  ("eager_e2e", "eager_k2k", "compiled_e2e",
                   "compiled_k2k")), row["compile_s"]), flush=True)


def minilm_row(base, run, device, work, checks, clock, row):
    """MiniLM's f16 build (the models phase checks its numerics) against
    BertModel in f16, eager and compiled."""
    from common import median_ms
    gpu = device.type == "cuda"
    src = os.path.join(base, minilm.DIR)
    stdout, err = run(os.path.join(base, minilm.LIB16),
                      [os.path.join(src, "input_ids.npy"),
                       os.path.join(src, "attention_mask.npy")],
                      os.path.join(work, "e_minilm.npy"),
                      timeout=min(120, clock.left() - 30),
                      repeat=20 if gpu else 1, warmup=3 if gpu else 0,
                      weights=minilm.widened_weights(src, work))
    if err:
        checks.add(False, "e2e minilm_f16 tfc", err)
    else:
        row["tfc_ms"] = median_ms(stdout)
    time_peers(row, minilm.torch_model(src, device, gpu), gpu)


def table(rows):
    """One row per model and timing: tfc, PyTorch eager and compiled."""
    head = ["model", "timing", "tfc ms", "eager ms", "compiled ms",
            "compiled as", "tfc vs eager", "tfc vs compiled"]
    lines = ["| " + " | ".join(head) + " |",
             "|---|---|" + "---:|" * 3 + "---|---:|---:|"]
    notes = []
    for r in rows:
        for kind, what in (("e2e", "end-to-end"),
                           ("k2k", "kernel-to-kernel (PyTorch queued "
                            "behind a sleeping kernel)")):
            ours = r.get("tfc_ms") if kind == "e2e" else None

            def vs(key):
                return ("%.2fx" % (r[key] / ours) if ours and r.get(key)
                        else "—")
            cells = [r["name"], what, "%.3f" % ours if ours else "—"]
            cells += ["%.3f" % r[k] if r.get(k) else "—" for k in
                      ("eager_" + kind, "compiled_" + kind)]
            cells += [r.get("compiled_as", "—"), vs("eager_" + kind),
                      vs("compiled_" + kind)]
            lines.append("| " + " | ".join(cells) + " |")
        notes += [n for n in r["notes"] if n not in notes]
    return lines, notes
