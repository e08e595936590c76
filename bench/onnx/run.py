#!/usr/bin/env python3
"""One .onnx file through tfc and through ONNX Runtime, on the CPU.

  bash bench/minilm/setup_peers.sh          # once: bench/.venv
  bench/.venv/bin/python bench/onnx/run.py [--cases minilm:1x128,...]
      [--threads 2] [--rounds 8] [--runs 10] [--warmup 2] [--compiles 3]

Cases (MODEL:BATCHxSEQ; default minilm:1x128,minilm:8x128,gpt2:1x128;
vit:1x224,vit:8x224 for the image model, SEQ its image size):
  minilm  all-MiniLM-L6-v2 (scripts/install-model.sh) as
          sentence-transformers computes it: BERT, mean pooling over the
          mask, L2 normalise (bench/minilm/peer.py's module); the fixture's
          sentences (tests/fixtures/minilm), tokenised and padded to SEQ;
  gpt2    GPT-2 124M's shape (transformers' GPT2Model with the gpt2
          config, 12 blocks, random weights of seed 0: no checkpoint can be
          downloaded here), its last hidden state; random ids, mask of ones
          (bench/decoders/run.py's model and export);
  vit     ViT-B/16's shape (transformers' ViTModel with its default config:
          hidden 768, 12 heads, 12 blocks, 16 x 16 patches of a 224 x 224
          image, random weights of seed 0), its last hidden state; random
          pixel_values [B, 3, 224, 224].

For each case:
  - export: PyTorch's dynamo exporter (torch.onnx.export(dynamo=True),
    operator set 18, static shapes, the weights in model.onnx.data), once:
    the file is kept in bench/.cache/onnx/<case>/ with export.json (the
    versions that wrote it); --reexport writes it again. The same process
    computes the model's output in float64 on the case's inputs;
  - tfc: tfc-compile model.onnx --batch B --seq-len S, --compiles times
    (the compile time reported is their median; the goal for MiniLM is
    under 5 s); tfc-run binds the weights from the same file;
  - ONNX Runtime: an InferenceSession on the same file (bench/minilm/peer.py
    ort: CPUExecutionProvider, ORT_ENABLE_ALL, intra_op_num_threads =
    --threads, inter_op_num_threads 1, sequential execution); the time its
    creation takes is reported next to tfc's compile time;
  - check, before any timing: each system runs once; the largest relative
    error of an output row (a sentence's embedding, a token's hidden
    state) against float64 is printed and must be under 1e-4;
  - timing: --rounds rounds; each runs both systems as fresh processes under
    /usr/bin/time -v, in an order rotated every round: --warmup untimed
    runs, then --runs timed runs (tfc-run --repeat; perf_counter around
    each ORT call). Latency = the median of the round medians; min = the
    fastest run; peak RSS = the largest of the process over the rounds.
Both systems get --threads threads. Prints a markdown table and the
command, and writes them with the JSON to --results.
"""
import argparse
import datetime as dt
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
CACHE = os.path.join(ROOT, "bench", ".cache", "onnx")
DEFAULT_CASES = "minilm:1x128,minilm:8x128,gpt2:1x128"
TITLES = {"minilm": "all-MiniLM-L6-v2, sentence embedding",
          "gpt2": "GPT-2 124M shape (random weights), last hidden state",
          "vit": "ViT-B/16 shape (random weights), last hidden state"}
SYSTEMS = ["tfc", "ort"]
LABELS = {"tfc": "tfc", "ort": "ONNX Runtime"}
# Largest relative error of an output row against float64 for the outputs
# to agree.
AGREE = 1e-4


def load(name, *path):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, *path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


minilm = load("bench_minilm_run", "bench", "minilm", "run.py")
peer = load("bench_minilm_peer", "bench", "minilm", "peer.py")
PEER = os.path.join(ROOT, "bench", "minilm", "peer.py")
log = minilm.log


def parse_case(text):
    m = re.fullmatch(r"(minilm|gpt2|vit):(\d+)x(\d+)", text)
    if not m:
        sys.exit(f"run.py: --cases: '{text}' is not MODEL:BATCHxSEQ with MODEL minilm, gpt2 or vit")
    if m.group(1) == "vit" and m.group(3) != "224":
        sys.exit(f"run.py: --cases: '{text}': ViT-B/16's image size is 224")
    return m.group(1), int(m.group(2)), int(m.group(3))


def case_inputs(model, batch, seq, model_dir):
    """The case's inputs: int64 ids and mask, or ViT's pixel values."""
    import numpy as np

    if model == "vit":
        return (np.random.default_rng(1).standard_normal((batch, 3, seq, seq)).astype(np.float32),)

    if model == "minilm":
        counts = minilm.token_counts(model_dir, minilm.SENTENCES)
        fits = [x for x, n in zip(minilm.SENTENCES, counts) if n <= seq]
        if not fits:
            sys.exit(f"run.py: no sentence of tests/fixtures/minilm has at most {seq} tokens")
        return tuple(minilm.tokenize(model_dir, [fits[(7 + i) % len(fits)] for i in range(batch)], seq))
    ids = np.random.default_rng(1).integers(0, 50257, (batch, seq)).astype(np.int64)
    return ids, np.ones_like(ids)


def vit_model(model_dir):
    """ViT-B/16's shape with random weights (seed 0), written once."""
    import torch
    from transformers import ViTConfig, ViTModel

    if not os.path.exists(os.path.join(model_dir, "model.safetensors")):
        torch.manual_seed(0)
        ViTModel(ViTConfig(), add_pooling_layer=False).save_pretrained(model_dir)
    return ViTModel.from_pretrained(model_dir, add_pooling_layer=False, attn_implementation="eager").eval()


def export(a):
    """(`run.py export`, in the bench venv) Writes the case's .onnx if it is
    missing, and its float64 output on the inputs to --ref."""
    import numpy as np
    import torch

    decoders = load("bench_decoders_run", "bench", "decoders", "run.py")
    model, batch, seq = parse_case(a.case)
    onnx_p = os.path.join(a.dir, "model.onnx")
    if model == "gpt2":
        decoders.make_model(a.model_dir, "gpt2", 12)
    if model == "vit":
        vit = vit_model(a.model_dir)
    if a.reexport or not os.path.exists(onnx_p):
        for f in ("model.onnx", "model.onnx.data", "export.json"):
            if os.path.exists(os.path.join(a.dir, f)):
                os.remove(os.path.join(a.dir, f))
        t0 = time.perf_counter()
        if model == "minilm":
            st = peer.load_st(a.model_dir)
            peer.export_onnx(peer.make_wrapper(st), batch, seq, onnx_p, 18)
        elif model == "vit":
            class Wrap(torch.nn.Module):
                def __init__(self, m):
                    super().__init__()
                    self.m = m

                def forward(self, pixel_values):
                    return self.m(pixel_values=pixel_values)[0]
            with torch.no_grad():
                torch.onnx.export(Wrap(vit), (torch.zeros(batch, 3, seq, seq),), onnx_p, dynamo=True,
                                  input_names=["pixel_values"], output_names=["last_hidden_state"],
                                  opset_version=18, external_data=True)
        else:
            decoders.export("gpt2", a.model_dir, onnx_p, batch, seq)
        import onnxscript
        import transformers
        with open(os.path.join(a.dir, "export.json"), "w") as f:
            json.dump({"exporter": "torch.onnx.export(dynamo=True), opset 18",
                       "torch": torch.__version__, "transformers": transformers.__version__,
                       "onnxscript": onnxscript.__version__,
                       "export_s": round(time.perf_counter() - t0, 2)}, f, indent=1)
    ids, mask = torch.from_numpy(np.load(a.ids)), torch.from_numpy(np.load(a.mask))
    with torch.inference_mode():
        if model == "vit":
            out = vit.double()(pixel_values=ids.double())[0]
        elif model == "minilm":
            out = peer.make_wrapper(peer.load_st(a.model_dir)).double()(ids, mask)
        else:
            m = decoders.model_class("gpt2").from_pretrained(a.model_dir, attn_implementation="eager")
            out = m.double().eval()(input_ids=ids, attention_mask=mask)[0]
    np.save(a.ref, out.numpy())


def row_error(got, ref):
    """The largest relative error (tfc_testing.arrays.relative_error) of an
    output row: a sentence's embedding, a token's (or patch's) hidden
    state."""
    from tfc_testing.arrays import relative_error

    got = got.reshape(-1, got.shape[-1])
    ref = ref.reshape(-1, ref.shape[-1])
    return max(relative_error(g, r) for g, r in zip(got, ref))


def run_system(s, a, c, runs, warmup):
    """Runs system s of case c once as a fresh process; returns (round
    median ms, min ms, peak RSS KiB, extra stats, output array)."""
    import numpy as np
    from tfc_testing import tfc_run

    out_p = os.path.join(c["work"], f"out_{s}.npy")
    if s == "tfc":
        argv, outs = tfc_run.command(os.path.join(a.bin, "tfc-run"), c["so"], c["inputs"], 1,
                                     lambda name: os.path.join(c["work"], name), weights=c["onnx"])
        argv += ["--repeat", str(runs), "--warmup", str(warmup), "--threads", str(a.threads)]
        text, rss = minilm.timed_process(argv, env=c["env"])
        m = re.search(r"median ([\d.]+) ms, min ([\d.]+) ms", text)
        if not m:
            sys.exit(f"run.py: cannot read tfc-run's times in:\n{text}")
        os.replace(outs[0], out_p)
        return float(m.group(1)), float(m.group(2)), rss, {}, np.load(out_p)
    st_p = os.path.join(c["work"], "stats_ort.json")
    argv = [sys.executable, PEER, "ort", "--onnx", c["onnx"], "--ids", c["ids_p"], "--mask", c["mask_p"],
            "--threads", str(a.threads), "--warmup", str(warmup), "--runs", str(runs),
            "--emb", out_p, "--stats", st_p]
    _, rss = minilm.timed_process(argv, env=c["env"])
    with open(st_p) as f:
        st = json.load(f)
    times = st.pop("times_ms")
    return statistics.median(times), min(times), rss, st, np.load(out_p)


def bench_case(a, text, env, model_dir):
    import numpy as np

    model, batch, seq = parse_case(text)
    name = f"{model}_b{batch}_s{seq}"
    cache = os.path.join(a.cache, name)
    work = os.path.join(a.work, name)
    os.makedirs(cache, exist_ok=True)
    os.makedirs(work, exist_ok=True)
    mdir = model_dir if model == "minilm" else os.path.join(
        a.cache, {"gpt2": "gpt2-random-12l", "vit": "vit-b16-random"}[model])
    inputs = case_inputs(model, batch, seq, model_dir)
    # ViT's one input goes where the ids go (ORT's peer feeds the graph's
    # inputs in order, as many as it has).
    ids, mask = inputs[0], inputs[-1]
    c = {"work": work, "env": env, "inputs": inputs, "onnx": os.path.join(cache, "model.onnx"),
         "so": os.path.join(work, "model.so"), "ids_p": os.path.join(work, "ids.npy"),
         "mask_p": os.path.join(work, "mask.npy")}
    np.save(c["ids_p"], ids)
    np.save(c["mask_p"], mask)

    ref_p = os.path.join(work, "ref_f64.npy")
    argv = [sys.executable, __file__, "export", "--case", text, "--dir", cache, "--model-dir", mdir,
            "--ids", c["ids_p"], "--mask", c["mask_p"], "--ref", ref_p] + (["--reexport"] if a.reexport else [])
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    if done.returncode:
        sys.exit(f"run.py: {text}: the export failed:\n{done.stderr[-3000:]}")
    with open(os.path.join(cache, "export.json")) as f:
        exported = json.load(f)
    ref = np.load(ref_p)

    compile_s = []
    for _ in range(a.compiles):
        cmd = [os.path.join(a.bin, "tfc-compile"), c["onnx"], "--batch", str(batch)] + (
            [] if model == "vit" else ["--seq-len", str(seq)]) + ["-o", c["so"]]
        minilm.wait_for(cmd[0], "binary")
        t0 = time.perf_counter()
        compiled = subprocess.run(cmd, capture_output=True, text=True, env=env)
        compile_s.append(time.perf_counter() - t0)
        if compiled.returncode:
            sys.exit(f"run.py: {' '.join(cmd)} failed:\n{compiled.stderr}")
    log(f"run.py: {text}: tfc-compile {statistics.median(compile_s):.2f} s ({compiled.stderr.strip()})")

    # Agreement, before any timing.
    errors, outs = {}, {}
    for s in SYSTEMS:
        outs[s] = run_system(s, a, c, 1, 0)[4]
        if outs[s].shape != ref.shape:
            sys.exit(f"run.py: {text}: {s}'s output is {outs[s].shape}, PyTorch's {ref.shape}")
        errors[s] = row_error(outs[s], ref)
    tfc_vs_ort = row_error(outs["tfc"], outs["ort"])
    log(f"run.py: {text}: max relative error of a row vs float64: " +
        ", ".join(f"{s} {errors[s]:.1e}" for s in SYSTEMS) + f"; tfc vs ORT {tfc_vs_ort:.1e}")
    bad = [s for s in SYSTEMS if not errors[s] < AGREE]
    if bad:
        sys.exit(f"run.py: {text}: {', '.join(bad)} disagree with float64 (max relative error of a row "
                 f"over {AGREE}): not timed")

    rec = {s: {"round_median_ms": [], "round_min_ms": [], "peak_rss_kib": []} for s in SYSTEMS}
    loads = []
    for r in range(a.rounds):
        for s in SYSTEMS[r % 2:] + SYSTEMS[:r % 2]:
            med, mn, rss, st, _ = run_system(s, a, c, a.runs, a.warmup)
            rec[s]["round_median_ms"].append(med)
            rec[s]["round_min_ms"].append(mn)
            rec[s]["peak_rss_kib"].append(rss)
            if st:
                rec[s].setdefault("session_ms", []).append(st["session_ms"])
                rec[s]["info"] = st
        loads.append(os.getloadavg()[0])
        log(f"run.py: {text} round {r + 1}/{a.rounds}: " +
            ", ".join(f"{s} {rec[s]['round_median_ms'][-1]:.2f}" for s in SYSTEMS) + f" ms (load {loads[-1]:.2f})")
    summary = {s: {"median_ms": statistics.median(rec[s]["round_median_ms"]),
                   "min_ms": min(rec[s]["round_min_ms"]),
                   "round_median_range_ms": [min(rec[s]["round_median_ms"]), max(rec[s]["round_median_ms"])],
                   "peak_rss_mib": max(rec[s]["peak_rss_kib"]) / 1024.0,
                   "max_row_rel_error_vs_f64": errors[s]} for s in SYSTEMS}
    summary["tfc"]["compile_s"] = statistics.median(compile_s)
    summary["ort"]["session_s"] = statistics.median(rec["ort"]["session_ms"]) / 1e3
    return {"model": model, "batch": batch, "seq": seq, "onnx": os.path.relpath(c["onnx"], ROOT),
            "onnx_mb": round(sum(os.path.getsize(os.path.join(cache, f)) for f in os.listdir(cache)
                                 if f.startswith("model.onnx")) / 2**20, 1),
            "export": exported, "compile_s_all": compile_s, "tfc_compile_note": compiled.stderr.strip(),
            "tfc_vs_ort_max_row_rel_error": tfc_vs_ort, "summary": summary, "rounds": rec,
            "loadavg_per_round": loads}


def render(res):
    m = res["meta"]
    v = m["versions"]
    L = [f"### One .onnx file, tfc and ONNX Runtime, {m['threads']} thread{'s' if m['threads'] != 1 else ''}"
         f" — {m['date_utc']}\n",
         f"{m['cpu']}, {m['nproc']} CPUs; tfc {m['tfc_git']}; onnxruntime {v.get('onnxruntime')}; "
         f"exported by torch {v.get('torch')} (transformers {v.get('transformers')}, dynamo exporter, opset 18); "
         f"{m['rounds']} interleaved rounds x ({m['warmup']} warm-up + {m['runs']} timed runs) per system; "
         f"load average {m['loadavg_start'][0]:.2f} at start, {m['loadavg_end'][0]:.2f} at end."
         + (f" **Warning: {m['warning']}.**" if m.get("warning") else "") + "\n",
         "| model | batch x seq | system | median ms | min ms | round medians ms | ORT / tfc (median) | "
         "peak RSS MiB | tfc-compile s / ORT session s | max rel. error of a row vs float64 |",
         "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for c in res["cases"]:
        for s in SYSTEMS:
            x = c["summary"][s]
            lo, hi = x["round_median_range_ms"]
            ratio = "—" if s == "tfc" else f"{x['median_ms'] / c['summary']['tfc']['median_ms']:.2f}x"
            build = x.get("compile_s") if s == "tfc" else x.get("session_s")
            L.append(f"| {TITLES[c['model']]} | {c['batch']} x {c['seq']} | {LABELS[s]} | {x['median_ms']:.2f} | "
                     f"{x['min_ms']:.2f} | {lo:.2f}–{hi:.2f} | {ratio} | {x['peak_rss_mib']:.0f} | "
                     f"{'' if build is None else f'{build:.2f}'} | {x['max_row_rel_error_vs_f64']:.1e} |")
    L.append("")
    L.append("Both systems read the same file (its size: " +
             ", ".join(f"{c['model']} {c['batch']}x{c['seq']} {c['onnx_mb']} MiB" for c in res["cases"]) +
             "). median: the median of the round medians; min: the fastest run; ORT / tfc > 1: tfc is faster. "
             "Peak RSS: the whole process (`/usr/bin/time -v`), ORT's with Python's interpreter. tfc-compile s: "
             f"the median of {m['compiles']} compiles of the file; ORT session s: the median time to create its "
             "InferenceSession (graph optimisations included). Rows: a sentence's embedding (MiniLM), a "
             "token's hidden state (GPT-2), a patch's or the class token's (ViT); tfc vs ORT: " +
             ", ".join(f"{c['model']} {c['batch']}x{c['seq']} {c['tfc_vs_ort_max_row_rel_error']:.1e}"
                       for c in res["cases"]) + ".")
    L.append("")
    L.append(f"Command: `{m['command']}`")
    return "\n".join(L) + "\n"


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "export":
        ap = argparse.ArgumentParser()
        ap.add_argument("mode")
        for f in ("--case", "--dir", "--model-dir", "--ids", "--mask", "--ref"):
            ap.add_argument(f, required=True)
        ap.add_argument("--reexport", action="store_true")
        return export(ap.parse_args())
    minilm.reexec_in_venv()
    try:
        import onnxruntime  # noqa: F401
        import onnxscript  # noqa: F401
    except ImportError as e:
        sys.exit(f"run.py: {sys.executable}: {e}: run bash bench/minilm/setup_peers.sh")
    sys.path.insert(0, os.path.join(ROOT, "tests", "pylib"))
    decoders = load("bench_decoders_run", "bench", "decoders", "run.py")

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default=DEFAULT_CASES, help="MODEL:BATCHxSEQ,... (MODEL: minilm, gpt2)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--runs", type=int, default=10, help="timed runs per system per round")
    ap.add_argument("--warmup", type=int, default=2, help="untimed runs per system per round")
    ap.add_argument("--compiles", type=int, default=3, help="tfc-compile runs per case (the median is reported)")
    ap.add_argument("--reexport", action="store_true", help="export the .onnx files again")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"), help="tfc-compile/tfc-run directory")
    ap.add_argument("--cache", default=CACHE, help="the exported files")
    ap.add_argument("--work", default=os.path.join(HERE, "work"))
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    a = ap.parse_args()
    for n in ("rounds", "runs", "compiles", "threads"):
        if getattr(a, n) < 1:
            sys.exit(f"run.py: --{n} must be at least 1")
    cases = [x for x in a.cases.split(",") if x]
    for x in cases:
        parse_case(x)
    env = decoders.peer_environments()[0]
    model_dir = minilm.sh(["bash", os.path.join(ROOT, "scripts", "install-model.sh")]).strip()
    meta = {"date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "cpu": minilm.cpu_model(), "nproc": os.cpu_count(), "threads": a.threads, "rounds": a.rounds,
            "runs": a.runs, "warmup": a.warmup, "compiles": a.compiles, "tfc_git": minilm.git_state(),
            "versions": minilm.versions(sys.executable), "loadavg_start": os.getloadavg(),
            "tfc_bin_mtime": minilm.bin_mtimes(a.bin),
            "command": " ".join(["bench/.venv/bin/python", "bench/onnx/run.py"] + sys.argv[1:])}
    log(f"run.py: {meta['cpu']}, {meta['nproc']} CPUs, {a.threads} threads, tfc {meta['tfc_git']}, "
        f"load {meta['loadavg_start']}")
    res = {"meta": meta, "cases": [bench_case(a, x, env, model_dir) for x in cases]}
    meta["loadavg_end"] = os.getloadavg()
    meta["tfc_bin_mtime_end"] = minilm.bin_mtimes(a.bin)
    if meta["tfc_bin_mtime_end"] != meta["tfc_bin_mtime"]:
        meta["warning"] = "tfc's binaries were rebuilt during the run"
        log(f"run.py: warning: {meta['warning']}")
    md = render(res)
    print(md)
    os.makedirs(a.results, exist_ok=True)
    base = os.path.join(a.results, "onnx-" + dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") +
                        f"-t{a.threads}")
    with open(base + ".json", "w") as f:
        json.dump(res, f, indent=1)
    with open(base + ".md", "w") as f:
        f.write(md)
    log(f"run.py: wrote {base}.md, {base}.json")


if __name__ == "__main__":
    sys.exit(main())
