"""Token generation in the device check (phase "generate"): tfc's
generation API, tfc.Generator(device="gpu") of python/tfc/generation.py (a
prefill build, then a decode-step build run once per token, the KV cache
in device tensors bound in place, only the logits back to the host),
against transformers' generate() with a static cache, whose decode steps
transformers compiles with torch.compile (inductor, "reduce-overhead":
CUDA graphs) on a GPU; greedy, 128 new tokens after a random prompt of
16 tokens (FULL), batch 1 and 8, on a LLaMA of Llama-3.2-1B's shape
(LlamaForCausalLM, the head tied to the token embeddings, e2e.LLAMA_1B) in
f16 with the same random weights.

prepare (here): the Generator's builds are compiled here, as it asks for
them: a Generator whose _build records each (batch, length, flags) of a
generate() call and compiles it with tfc-compile into
models/generate_*.so (from the config and a safetensors header, as
e2e.py), listed in generate/spec.json. The run's Generator (Prepared)
loads those builds where the Generator would compile them (there is no
tfc-compile there); the rest of the generation is the Generator's own.

run: transformers draws the weights from the seed on the GPU
(e2e.hf_model) and they are written for tfc (f16). Per batch: tfc, a
warm-up generate() (loads the builds, captures the CUDA graphs), then the
median of timed ones; transformers, generate(cache_implementation=
"static"): the first call compiles (its time is printed and not counted),
a second one warms, then the median of timed ones. Both times are wall
clocks around the whole generate() (prefill, the decode steps, the
search on the host): end to end. tokens/s = batch * new tokens / time.

The tokens: two systems' f16 kernels do not give the same logits to the
last bit, and with random weights the top two logits of a step are
sometimes closer than that, so identical tokens are not required. The
check: tfc's tokens against transformers' eager generate() (static cache,
not compiled, its logits kept), row by row: they agree up to a first
divergence (if any), and there tfc's token is a near tie in
transformers' logits (its logit within TIE_TOL x max|logits| of the top
one). Each row's first divergence is printed, against the compiled
peer's tokens too.

The dry run (the CPU): a tiny config, tfc's CPU builds, transformers in
float32 on the f16-rounded weights, torch.compile with the aot_eager
backend (a smoke test). The emulated run: the tiny config's GPU builds on
the PTX interpreter, the tokens only.
"""

import json
import os
import shutil
import statistics
import sys
import time

import numpy as np

import e2e
import minilm

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))  # tfc

DIR = "generate"
NAME = "llama_1b_generate"
TARGET = 1.5  # issue 47: generation tokens/s >= 1.5x the compiled peer's
TIE_TOL = e2e.F16_TOL
# The phase's share of the run's budget (seconds), and what transformers'
# compile of the decode step is taken to need before one has been timed.
SHARE_S = float(os.environ.get("DEVICE_CHECK_GENERATE_BUDGET", 200))
COMPILE_S = 90
CONFIG = dict(e2e.LLAMA_1B, architectures=["LlamaForCausalLM"],
              bos_token_id=None, eos_token_id=None, pad_token_id=None)
# (prompt tokens, new tokens, batches, config changes)
FULL = (16, 128, (1, 8), {})
SMALL = (5, 8, (1, 3), e2e.MODELS[1].small[0])


class _Recorded(Exception):
    """Raised by a recorded build's run: prepare needs the builds only."""


def generators():
    """(Recording, Prepared): tfc.Generator with its builds compiled by
    tfc-compile and recorded, not loaded (prepare), or loaded from those
    prepare compiled (the run). tfc is imported here, so that a failure
    to import it fails this part only."""
    import tfc

    class Recording(tfc.Generator):
        def __init__(self, tfc_compile, out, target, gpu_flags, *args,
                     **kw):
            self.tfc_compile, self.out, self.target = tfc_compile, out, \
                target
            self.gpu_flags, self.built = gpu_flags, []
            super().__init__(*args, **kw)

        def _build(self, batch, seq_len, flags):
            lib = os.path.join("models", "generate_b%d_s%d.so" % (
                batch, seq_len))
            args = [f for f in list(flags) + self.extra_args + self.gpu_flags
                    if not f.startswith("--target=")]
            err = minilm.compile_hf(
                self.tfc_compile, self.directory, batch, seq_len,
                os.path.join(self.out, lib), self.target,
                ["--dtype=" + self.dtype] + args)
            if err:
                raise tfc.Error(err)
            self.built.append({"batch": batch, "seq_len": seq_len,
                               "flags": list(flags), "lib": lib})

            class Stub:
                def run(self, *args, **kw):
                    raise _Recorded()
            return Stub()

    class Prepared(tfc.Generator):
        def __init__(self, base, builds, *args, **kw):
            self.base = base
            self.prepared = {_key(b["batch"], b["seq_len"], b["flags"]):
                             b["lib"] for b in builds}
            super().__init__(*args, **kw)

        def _build(self, batch, seq_len, flags):
            key = _key(batch, seq_len, flags)
            if key not in self._models:
                if key not in self.prepared:
                    raise tfc.Error("no prepared build of batch %d, length "
                                    "%d, %s" % (batch, seq_len,
                                                " ".join(flags)))
                self._models[key] = tfc.Model(
                    os.path.join(self.base, self.prepared[key]),
                    weights=self.weights)
            return self._models[key]
    return Recording, Prepared


def _key(batch, seq_len, flags):
    return json.dumps([int(batch), int(seq_len), list(flags)])


def prepare(tfc_compile, out, target, gpu_flags, work, small):
    """Compiles the Generator's builds of every batch into out/models and
    writes out/generate/spec.json; {NAME: error line or "ok"}."""
    prompt, new, batches, changes = SMALL if small else FULL
    cfg = dict(CONFIG, **changes)
    shutil.rmtree(os.path.join(out, DIR), ignore_errors=True)
    src = os.path.join(work, NAME)
    os.makedirs(src, exist_ok=True)
    with open(os.path.join(src, "config.json"), "w") as f:
        json.dump(cfg, f)
    tensors = e2e.shapes(e2e.Model(NAME, cfg, 1, 1), "model.")
    e2e.write_header_only(os.path.join(src, "model.safetensors"), tensors)
    builds = []
    import tfc
    try:
        for b in batches:
            gen = generators()[0](tfc_compile, out, target, gpu_flags, src,
                             prompt + new, batch=b, dtype="f16",
                             device="gpu" if target == "nvptx" else "cpu")
            try:
                gen.generate(np.zeros((b, prompt), np.int64),
                             max_new_tokens=new)
            except _Recorded:
                pass
            builds += gen.built
    except tfc.Error as e:
        return {NAME: str(e).splitlines()[0]}
    os.makedirs(os.path.join(out, DIR))
    with open(os.path.join(out, DIR, "spec.json"), "w") as f:
        json.dump({"cfg": cfg, "prompt": prompt, "new": new,
                   "batches": list(batches), "builds": builds,
                   "tensors": {k: list(v) for k, v in tensors.items()}}, f)
    return {NAME: "ok"}


def _wall_s(fn, gpu):
    """(seconds, result) of fn(), the GPU's queue drained on both sides."""
    import torch
    if gpu:
        torch.cuda.synchronize()
    t = time.perf_counter()
    result = fn()
    if gpu:
        torch.cuda.synchronize()
    return time.perf_counter() - t, result


def _median_s(fn, gpu, warm_s, target_s, clock):
    """The median of timed calls of fn() (about target_s of them, 3 to
    10, as the budget allows), after one that took warm_s."""
    n = int(min(10, max(3, target_s / max(warm_s, 1e-6))))
    n = max(1, min(n, int((clock.left() - 10) / max(warm_s, 1e-6))))
    return statistics.median(_wall_s(fn, gpu)[0] for _ in range(n)), n


def divergence(got, want, logits, prompt):
    """(the first index of the new tokens where the rows of token ids got
    and want differ, or None; the margin there: want's top logit less the
    logit of got's token, as a share of max|logits|, or None without
    `logits`, want's per step [steps, vocab])."""
    diff = np.nonzero(got[prompt:] != want[prompt:])[0]
    if not len(diff):
        return None, 0.0
    i = int(diff[0])
    if logits is None:
        return i, None
    row = logits[i]
    return i, float((row.max() - row[int(got[prompt + i])]) /
                    np.abs(row).max())


def _compile_config(gpu):
    """transformers' automatic compilation of the decode steps: its own
    default on the GPU (inductor, reduce-overhead); aot_eager on the CPU
    (a smoke test: transformers compiles only on accelerators unless
    told)."""
    from transformers import CompileConfig
    if gpu:
        return None
    cc = CompileConfig(backend="aot_eager", mode=None)
    cc._compile_all_devices = True
    return cc


def peer_generate(model, ids, new, compiled, gpu, logits=False):
    """transformers' greedy generate() of `new` tokens with a static
    cache, compiled (its automatic compilation) or not."""
    import torch
    kw = dict(attention_mask=torch.ones_like(ids), max_new_tokens=new,
              do_sample=False, num_beams=1,
              cache_implementation="static")
    if compiled:
        cc = _compile_config(gpu)
        if cc is not None:
            kw["compile_config"] = cc
    else:
        kw["disable_compile"] = True
    if logits:
        kw.update(output_logits=True, return_dict_in_generate=True)
    with torch.no_grad():
        return model.generate(ids, **kw)


def check(base, manifest, device, work, checks, clock, rows, seed,
          timed=True, gpu=None):
    """Each batch of the prepared generation: the tokens (a check), and
    with `timed` tfc's and the compiled peer's tokens/s; one row per batch
    in `rows`, within SHARE_S of the budget. `gpu`: the GPU's branches (by
    default where `device` is CUDA)."""
    from common import Clock
    path = os.path.join(base, DIR, "spec.json")
    status = manifest.get("generate") or {}
    if not os.path.exists(path):
        if status.get(NAME, "ok") != "ok":
            checks.add(False, "generate %s" % NAME,
                       "not built: %s" % status[NAME])
        return
    with open(path) as f:
        spec = json.load(f)
    share = Clock(min(SHARE_S, clock.left()))
    try:
        _check(spec, base, manifest, device, work, checks, share, rows,
               seed, timed, device.type == "cuda" if gpu is None else gpu)
    except Exception as e:  # a bug here must not end the whole check
        checks.add(False, "generate %s" % NAME, "check.py error: %s: %s" % (
            type(e).__name__, str(e).splitlines()[0][:200] if str(e)
            else ""))


def _check(spec, base, manifest, device, work, checks, clock, rows, seed,
           timed, gpu):
    """tfc's generation and its check for every batch first, then the
    compiled peer's (minutes of compiling) while the time lasts."""
    import tfc
    import torch
    dtype = torch.float16 if gpu else torch.float32
    model, config = e2e.hf_model(spec, device, torch.float16, seed)
    model_dir = os.path.join(work, NAME)
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(spec["cfg"], f)
    e2e.write_weights(model, spec, os.path.join(model_dir,
                                                "model.safetensors"))
    model = model.to(dtype)  # the CPU's reference: f16 weights, in f32
    draw = torch.Generator(device=device)
    draw.manual_seed(seed)
    runs = []
    for b in spec["batches"]:
        row = {"name": NAME, "batch": b, "prompt": spec["prompt"],
               "new": spec["new"], "notes": []}
        rows.append(row)
        if not timed:
            row["notes"].append("tokens only (the PTX interpreter, or "
                                "--skip-timing): no timing")
        ids = torch.randint(0, config.vocab_size, (b, spec["prompt"]),
                            generator=draw, device=device)
        label = "generate %s batch %d: tfc's tokens" % (NAME, b)
        if clock.left() < 20:
            row["notes"].append("batch %d skipped: time budget spent" % b)
            checks.add(False, label, "not run: time budget spent")
            continue
        try:
            got = _tfc_generate(row, spec, base, manifest, model_dir, ids,
                                gpu, timed, clock)
        except tfc.Error as e:  # a build that does not load or run
            checks.add(False, label, str(e).splitlines()[0])
            continue
        _tokens_check(row, model, ids, got, gpu, checks, label)
        runs.append((row, ids, got))
    compile_s = None
    for row, ids, got in runs if timed else ():
        _time_peer(row, model, ids, gpu, got, clock, compile_s)
        compile_s = row.get("compile_s", compile_s)
    for row in rows:
        print("generate %s batch %d: tfc %s, transformers compiled %s "
              "(tokens/s, end to end)" % (
                  NAME, row["batch"], _tps(row, "tfc_s"),
                  _tps(row, "peer_s")), flush=True)


def _tfc_generate(row, spec, base, manifest, model_dir, ids, gpu, timed,
                  clock):
    """tfc.Generator's tokens [B, prompt + new] (numpy); with `timed`, the
    median time of its generate() on the row."""
    gen = generators()[1](base, spec["builds"], model_dir,
                   spec["prompt"] + spec["new"], batch=row["batch"],
                   dtype="f16", device="gpu" if manifest["target"] == "nvptx"
                   else "cpu")
    try:
        host = ids.cpu().numpy()

        def call():
            return gen.generate(host, max_new_tokens=spec["new"])
        warm, got = _wall_s(call, gpu)
        if timed:
            row["tfc_s"], row["tfc_runs"] = _median_s(call, gpu, warm, 2.0,
                                                      clock)
        return got
    finally:
        gen.close()


def _tokens_check(row, model, ids, got, gpu, checks, label):
    """tfc's tokens against transformers' eager generate(): the same up to
    a first divergence per row, a near tie in its logits there."""
    import torch
    prompt, new = row["prompt"], row["new"]
    ref = peer_generate(model, ids, new, False, gpu, logits=True)
    want = ref.sequences.cpu().numpy()
    logits = torch.stack(ref.logits, 1).float().cpu().numpy()
    if got.shape != want.shape or not np.array_equal(
            got[:, :prompt], ids.cpu().numpy()):
        return checks.add(False, label, "tfc returned %s, transformers %s" %
                          (list(got.shape), list(want.shape)))
    firsts, worst = [], 0.0
    for r in range(len(got)):
        i, margin = divergence(got[r], want[r], logits[r], prompt)
        firsts.append(i)
        worst = max(worst, margin)
    row["tfc_first_divergence"] = firsts
    same = "transformers' eager %s generate()" % ("f16" if gpu else "f32")
    return checks.add(worst <= TIE_TOL, label, (
        "identical to %s (%d new tokens)" % (same, new)
        if all(i is None for i in firsts) else
        "as %s up to the first divergence (per row: %s of %d), there a "
        "near tie: margin %.2e of max|logits| (tol %.1e)" % (
            same, ", ".join("none" if i is None else str(i)
                            for i in firsts), new, worst, TIE_TOL)))


def _time_peer(row, model, ids, gpu, got, clock, compile_s):
    """transformers' compiled generate(): the compile, a warm-up, then the
    median of timed calls; its tokens' first divergence from tfc's. Not
    begun where the time left is under what the last compile took
    (compile_s; COMPILE_S before the first)."""
    prompt, new = row["prompt"], row["new"]
    need = 1.2 * (compile_s or (COMPILE_S if gpu else 10)) + 10
    if clock.left() < need:
        row["notes"].append(
            "batch %d: transformers' compiled generate() not run: %.0f s "
            "left of the generation's share, a compile and its timing take "
            "about %.0f" % (row["batch"], clock.left(), need))
        return
    row["compile_s"], out = _wall_s(
        lambda: peer_generate(model, ids, new, True, gpu), gpu)
    row["compiled_as"] = ("inductor reduce-overhead" if gpu else
                          "aot_eager (CPU smoke test)")
    if not hasattr(model, "_compiled_call"):
        row["compiled_as"] = "not compiled (transformers declined)"
    warm, out = _wall_s(lambda: peer_generate(model, ids, new, True, gpu),
                        gpu)
    row["peer_s"], row["peer_runs"] = _median_s(
        lambda: peer_generate(model, ids, new, True, gpu), gpu, warm, 2.0,
        clock)
    out = out.cpu().numpy()
    if out.shape == got.shape:
        row["peer_first_divergence"] = [
            divergence(got[r], out[r], None, prompt)[0]
            for r in range(len(out))]


def _tps(row, key):
    t = row.get(key)
    return "%.1f" % (row["batch"] * row["new"] / t) if t else "—"


def table(rows):
    """One row per batch: tokens/s of tfc and of the compiled peer."""
    head = ["model", "batch", "timing", "tfc tok/s", "tfc s",
            "transformers tok/s", "transformers s", "compiled as",
            "compile s", "tfc vs transformers", "target",
            "first divergence (tfc vs eager; vs compiled)"]
    lines = ["| " + " | ".join(head) + " |",
             "|---|---:|---|" + "---:|" * 4 + "---|" + "---:|" * 3 + "---|"]
    notes = []
    for r in rows:
        ratio = (r["peer_s"] / r["tfc_s"] if r.get("peer_s") and
                 r.get("tfc_s") else None)

        def firsts(key):
            v = r.get(key)
            return "—" if v is None else ",".join(
                "none" if i is None else str(i) for i in v)
        cells = [r["name"], str(r["batch"]), "end-to-end",
                 _tps(r, "tfc_s"), "%.3f" % r["tfc_s"] if r.get("tfc_s")
                 else "—", _tps(r, "peer_s"),
                 "%.3f" % r["peer_s"] if r.get("peer_s") else "—",
                 r.get("compiled_as", "—"),
                 "%.0f" % r["compile_s"] if r.get("compile_s") else "—",
                 "%.2fx" % ratio if ratio else "—", ">= %.1fx" % TARGET,
                 "%s; %s" % (firsts("tfc_first_divergence"),
                             firsts("peer_first_divergence"))]
        lines.append("| " + " | ".join(cells) + " |")
        notes += [n for n in r["notes"] if n not in notes]
    return lines, notes
