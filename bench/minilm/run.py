#!/usr/bin/env python3
"""MiniLM (sentence-transformers/all-MiniLM-L6-v2) CPU benchmark: tfc fused,
tfc unfused, PyTorch eager and ONNX Runtime, measured in one run.

  bash bench/minilm/setup_peers.sh          # once: venv, onnxruntime, ...
  bench/.venv/bin/python bench/minilm/run.py [--threads 2] [--rounds 5] ...

For each batch (default 1 and 8; sequence 128, token ids from the model's own
tokenizer.json via `tokenizers`, padded to 128):
  - compiles the model with tfc-compile twice (fused, --no-fusion) and exports
    it to ONNX (static shapes, pooling + normalise inside the graph);
  - runs `--rounds` rounds; each round runs every system once, in a rotated
    order, as a fresh process under /usr/bin/time -v: `--warmup` untimed runs,
    then `--runs` timed runs. tfc is timed by `tfc-run --repeat` (which prints
    the median of its runs); PyTorch and ORT by perf_counter around each call
    (bench/minilm/peer.py);
  - latency = the median over rounds of each round's median; min = the fastest
    single run; peak memory = the largest peak RSS of the system's process
    over the rounds;
  - checks that all systems' embeddings agree (cosine vs PyTorch).
--quantize adds two int8 systems: tfc fused with --quantize-weights=int8
--quantize-activations=int8 (weights per output column, activations per row
and 128 values, integer dot products) and ONNX Runtime on its
quantize_dynamic export (int8 weights, activations uint8 per tensor at run
time). Their embeddings differ from PyTorch's by the quantization: their
cosines are reported, not checked. --max-tokens N keeps only the sentences of at most N tokens (the fixture's
have 4 to 104). --seq-len longest pads each batch to its longest sentence instead (as a
tokenizer called with padding=True does): the peers take exactly that many
tokens (ONNX exported at that length), and with --lengths 16,32,64,128 the
tfc systems are one library built for those lengths (tfc-compile --seq-len
16,32,64,128), which the runtime runs as the shortest that holds the batch
(the inputs padded with zeros, the outputs cut): what a user who does not
know the lengths ahead gets. With --tfc-batches 1,2,4,8 the tfc systems are
one library built for those batch sizes too (tfc-compile --batch 1,2,4,8),
used for every batch: the runtime runs a batch as the smallest built size
that holds it, a larger one in slices of the largest.
--bf16 adds tfc fused with --dtype=bf16
(weights and activations in bf16, matmul sums and norm statistics in f32)
and PyTorch eager on the model converted with .to(torch.bfloat16); their
cosines are reported, not checked, too.
--systems may also name tfc-int8-noamx and tfc-bf16-noamx: the int8 and
bf16 builds run with TFC_AMX=0 (their matmuls on AVX-512 where the CPU has
AMX; docs/Dialect.md), in the same rounds as the rest.
Prints a markdown table and writes it plus JSON to bench/minilm/results/.
Every system gets the same thread count (--threads) and its runtime's default
thread wait policy.
"""
import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
# The bench venv (bench/minilm/setup_peers.sh; BENCH_VENV as there).
VENV = os.environ.get("BENCH_VENV") or os.path.join(ROOT, "bench", ".venv")
VENV_PY = os.path.join(VENV, "bin", "python")

# The sentences of tests/fixtures/minilm (5 to 104 tokens).
with open(os.path.join(ROOT, "tests", "fixtures", "minilm", "sentences.json")) as f:
    SENTENCES = json.load(f)["sentences"]

SYSTEMS = ["tfc-fused", "tfc-unfused", "torch", "ort"]
QUANTIZED = ["tfc-int8", "ort-int8"]
BF16 = ["tfc-bf16", "torch-bf16"]
# tfc systems that run another's build in another environment: the int8
# and bf16 builds with TFC_AMX=0 (their matmuls on AVX-512 where the host
# has AMX; docs/Dialect.md).
VARIANT_OF = {"tfc-int8-noamx": ("tfc-int8", {"TFC_AMX": "0"}),
              "tfc-bf16-noamx": ("tfc-bf16", {"TFC_AMX": "0"})}
LABELS = {
    "tfc-fused": "tfc fused",
    "tfc-unfused": "tfc unfused (--no-fusion)",
    "torch": "PyTorch eager",
    "ort": "ONNX Runtime",
    "tfc-int8": "tfc fused, int8 weights and activations",
    "ort-int8": "ONNX Runtime, quantize_dynamic int8",
    "tfc-bf16": "tfc fused, --dtype=bf16",
    "torch-bf16": "PyTorch eager, bfloat16",
    "tfc-int8-noamx": "tfc fused, int8, TFC_AMX=0",
    "tfc-bf16-noamx": "tfc fused, --dtype=bf16, TFC_AMX=0",
}
TFC_FLAGS = {
    "tfc-fused": [],
    "tfc-unfused": ["--no-fusion"],
    "tfc-int8": ["--quantize-weights=int8", "--quantize-activations=int8"],
    "tfc-bf16": ["--dtype=bf16"],
}
# The peers' commands (bench/minilm/peer.py).
PEER_CMD = {"torch": "torch", "torch-bf16": "torch-bf16", "ort": "ort",
            "ort-int8": "ort"}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def reexec_in_venv():
    """Runs this script again in the bench venv where it exists and this is
    another python (sys.prefix: a venv's python is a link to the system's)."""
    if os.path.exists(VENV_PY) and os.path.realpath(sys.prefix) != os.path.realpath(VENV):
        os.execv(VENV_PY, [VENV_PY] + sys.argv)
    try:
        import tokenizers  # noqa: F401
        import numpy  # noqa: F401
    except ImportError:
        sys.exit("run.py: needs the bench venv: bash bench/minilm/setup_peers.sh")


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw).stdout


def wait_for(path, what):
    # The lead may be relinking the build tree: wait a little for the binary.
    for _ in range(60):
        if os.path.exists(path):
            return
        time.sleep(2)
    sys.exit(f"run.py: {what} {path} is missing")


def timed_process(cmd, env=None, retries=2):
    """Runs cmd under /usr/bin/time -v; returns (stdout+stderr, peak RSS KiB)."""
    for attempt in range(retries + 1):
        wait_for(cmd[0], "binary")
        p = subprocess.run(["/usr/bin/time", "-v"] + cmd, text=True,
                           capture_output=True, env=env)
        if p.returncode == 0:
            m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
            c = re.search(r"Percent of CPU this job got: (\d+)%", p.stderr)
            timed_process.cpu_percent = int(c.group(1)) if c else None
            return p.stdout + p.stderr, int(m.group(1))
        log(f"run.py: failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
        time.sleep(5)
    sys.exit("run.py: giving up")


def bin_mtimes(bindir):
    out = {}
    for p in ("bin/tfc-compile", "bin/tfc-run", "lib/libtfcrt.so"):
        f = os.path.join(bindir, "..", p)
        if os.path.exists(f):
            out[p] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(os.path.getmtime(f)))
    return out


def cpu_model():
    try:
        out = sh(["lscpu"])
        m = re.search(r"Model name:\s*(.+)", out)
        return m.group(1).strip() if m else platform.processor()
    except Exception:
        return platform.processor()


def versions(py):
    """The peers' versions in py's environment, and PyTorch's BLAS
    ("torch_blas": its build's BLAS_INFO)."""
    code = ("import json,re,numpy,torch,transformers,tokenizers,sentence_transformers,onnx,onnxruntime;"
            "v={m.__name__: m.__version__ for m in "
            "[numpy,torch,transformers,tokenizers,sentence_transformers,onnx,onnxruntime]};"
            "b=re.search(r'BLAS_INFO=(\\w+)',torch.__config__.show());"
            "v['torch_blas']=b.group(1) if b else 'unknown';"
            "print(json.dumps(v))")
    try:
        return json.loads(sh([py, "-c", code]))
    except Exception as e:
        return {"error": str(e)}


def git_state():
    try:
        head = sh(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]).strip()
        dirty = bool(sh(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"]).strip())
        return head + ("-dirty" if dirty else "")
    except Exception:
        return "unknown"


def token_counts(model_dir, sentences):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return [len(e.ids) for e in tok.encode_batch(sentences)]


def tokenize(model_dir, sentences, seq):
    import numpy as np
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_truncation()
    tok.enable_padding(length=None if seq == "longest" else seq, pad_id=0, pad_token="[PAD]")
    enc = tok.encode_batch(sentences)
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    assert seq == "longest" or ids.shape == (len(sentences), seq), ids.shape
    return ids, mask


def main():
    reexec_in_venv()
    import numpy as np
    sys.path.insert(0, os.path.join(ROOT, "tests", "pylib"))
    from tfc_testing.arrays import bf16_to_f32

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--seq-len", default="128", help="tokens per sentence, or 'longest': each batch's longest sentence")
    ap.add_argument("--max-tokens", type=int, help="use only the sentences of at most this many tokens (the fixture's run from 4 to 104)")
    ap.add_argument("--lengths", help="the tfc systems' built lengths (tfc-compile --seq-len L1,L2,...; default: the batch's length)")
    ap.add_argument("--tfc-batches", help="the tfc systems' built batch sizes (tfc-compile --batch B1,B2,...; default: the batch's size)")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--runs", type=int, default=10, help="timed runs per system per round")
    ap.add_argument("--warmup", type=int, default=2, help="untimed runs per system per round")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--quantize", action="store_true", help="add the int8 systems (" + ", ".join(QUANTIZED) + ")")
    ap.add_argument("--bf16", action="store_true", help="add the bf16 systems (" + ", ".join(BF16) + ")")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"), help="tfc-compile/tfc-run directory")
    ap.add_argument("--work", default=os.path.join(HERE, "work"))
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    ap.add_argument("--no-latest", action="store_true", help="do not overwrite results/latest.md")
    ap.add_argument("--render", metavar="JSON", help="only print the table of a saved result")
    a = ap.parse_args()
    if a.render:
        with open(a.render) as f:
            res = json.load(f)
        print(render(res, list(next(iter(res["batches"].values()))["summary"])), end="")
        return

    systems = [s for s in a.systems.split(",") if s]
    if a.quantize:
        systems += [s for s in QUANTIZED if s not in systems]
    if a.bf16:
        systems += [s for s in BF16 if s not in systems]
    for s in systems:
        assert s in SYSTEMS + QUANTIZED + BF16 + list(VARIANT_OF), s
    batches = [int(b) for b in a.batches.split(",")]
    sentences = SENTENCES
    if a.seq_len != "longest":
        a.seq_len = int(a.seq_len)
    T = a.threads
    os.makedirs(a.work, exist_ok=True)
    os.makedirs(a.results, exist_ok=True)
    py = sys.executable
    peer = os.path.join(HERE, "peer.py")
    compile_bin = os.path.join(a.bin, "tfc-compile")
    run_bin = os.path.join(a.bin, "tfc-run")
    model_dir = sh(["bash", os.path.join(ROOT, "scripts", "install-model.sh")]).strip()
    weights = os.path.join(model_dir, "model.safetensors")
    if a.max_tokens:
        counts = token_counts(model_dir, SENTENCES)
        sentences = [x for x, n in zip(SENTENCES, counts) if n <= a.max_tokens]
        if not sentences:
            sys.exit(f"run.py: no sentence has at most {a.max_tokens} tokens (they have {counts})")

    base_env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "KMP_BLOCKTIME", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        base_env.pop(k, None)
    meta = {
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu_model(), "nproc": os.cpu_count(), "threads": T,
        "seq_len": a.seq_len, "tfc_lengths": a.lengths, "tfc_batches": a.tfc_batches, "max_tokens": a.max_tokens, "rounds": a.rounds, "runs_per_round": a.runs,
        "warmup_per_round": a.warmup, "tfc_git": git_state(),
        "versions": versions(py),
        "loadavg_start": os.getloadavg(), "model_dir": model_dir,
        "tfc_bin_mtime": bin_mtimes(a.bin),
        "command": " ".join(["bench/.venv/bin/python", "bench/minilm/run.py"] + sys.argv[1:]),
    }
    log(f"run.py: {meta['cpu']}, {meta['nproc']} CPUs, {T} threads, tfc {meta['tfc_git']}, load {meta['loadavg_start']}")

    results = {"meta": meta, "batches": {}}
    used_bins = set()  # (binary, mtime) of every tfc-compile / tfc-run use
    built = {}  # library -> its build record: one library serves every batch with --tfc-batches
    for B in batches:
        sents = sentences if B == len(sentences) else [sentences[(7 + i) % len(sentences)] for i in range(B)]
        ids, mask = tokenize(model_dir, sents, a.seq_len)
        seq = ids.shape[1]
        ids_p = os.path.join(a.work, f"ids_b{B}.npy")
        mask_p = os.path.join(a.work, f"mask_b{B}.npy")
        np.save(ids_p, ids)
        np.save(mask_p, mask)

        # Build.
        art = {}
        build = {}
        for s in systems:
            if s.startswith("tfc"):
                b_name = VARIANT_OF.get(s, (s,))[0]
                so = os.path.join(a.work, f"minilm_b{a.tfc_batches or B}_s{a.lengths or seq}_{b_name}.so")
                if so in built:
                    build[s] = built[so]
                    art[s] = so
                    continue
                cmd = [compile_bin, "--hf", model_dir, "--batch", a.tfc_batches or str(B), "--seq-len", a.lengths or str(seq), "-o", so]
                cmd += TFC_FLAGS[b_name]
                wait_for(compile_bin, "binary")
                t0 = time.perf_counter()
                out = subprocess.run(cmd, text=True, capture_output=True)
                if out.returncode:
                    sys.exit(f"run.py: {' '.join(cmd)} failed:\n{out.stderr}")
                build[s] = {"compile_s": round(time.perf_counter() - t0, 2), "note": out.stderr.strip(),
                            "tfc_compile_mtime": bin_mtimes(a.bin).get("bin/tfc-compile")}
                used_bins.add(("bin/tfc-compile", build[s]["tfc_compile_mtime"]))
                art[s] = so
                built[so] = build[s]
                log(f"run.py: b{B} {s}: compiled in {build[s]['compile_s']} s ({build[s]['note']})")
        onnx_p = os.path.join(a.work, f"minilm_b{B}_s{seq}.onnx")
        onnx_of = {"ort": onnx_p, "ort-int8": os.path.join(a.work, f"minilm_b{B}_s{seq}_int8.onnx")}
        if "ort" in systems or "ort-int8" in systems:
            t0 = time.perf_counter()
            sh([py, peer, "export", "--model-dir", model_dir, "--batch", str(B),
                "--seq-len", str(seq), "--onnx", onnx_p], env=base_env)
            build["ort"] = {"export_s": round(time.perf_counter() - t0, 2), "onnx_mb": round(os.path.getsize(onnx_p) / 2**20, 1)}
            log(f"run.py: b{B} ort: exported in {build['ort']['export_s']} s")
        if "ort-int8" in systems:
            sh([py, peer, "quantize", "--model-dir", model_dir, "--onnx", onnx_p, "--out", onnx_of["ort-int8"]])
            build["ort-int8"] = {"onnx_mb": round(os.path.getsize(onnx_of["ort-int8"]) / 2**20, 1)}

        # Measure, interleaved.
        rec = {s: {"round_median_ms": [], "round_min_ms": [], "peak_rss_kib": [], "all_ms": [],
                   "cpu_percent": []} for s in systems}
        embs = {}
        loads = []
        for r in range(a.rounds):
            order = systems[r % len(systems):] + systems[:r % len(systems)]
            for s in order:
                emb_p = os.path.join(a.work, f"emb_b{B}_{s}.npy")
                if s.startswith("tfc"):
                    cmd = [run_bin, art[s], "--weights", weights, "--input", ids_p, "--input", mask_p,
                           "--output", emb_p, "--repeat", str(a.runs), "--warmup", str(a.warmup),
                           "--threads", str(T)]
                    bm = bin_mtimes(a.bin)
                    used_bins.add(("bin/tfc-run", bm.get("bin/tfc-run")))
                    used_bins.add(("lib/libtfcrt.so", bm.get("lib/libtfcrt.so")))
                    out, rss = timed_process(cmd, env=dict(base_env, **VARIANT_OF.get(s, (s, {}))[1]))
                    m = re.search(r"median ([\d.]+) ms, min ([\d.]+) ms", out)
                    if not m:
                        sys.exit(f"run.py: cannot parse tfc-run output:\n{out}")
                    med, mn = float(m.group(1)), float(m.group(2))
                else:
                    st_p = os.path.join(a.work, f"stats_b{B}_{s}.json")
                    cmd = [py, peer, PEER_CMD[s], "--model-dir", model_dir,
                           "--onnx", onnx_of.get(s, onnx_p), "--ids", ids_p,
                           "--mask", mask_p, "--threads", str(T), "--warmup", str(a.warmup),
                           "--runs", str(a.runs), "--emb", emb_p, "--stats", st_p]
                    out, rss = timed_process(cmd, env=base_env)
                    with open(st_p) as f:
                        st = json.load(f)
                    med, mn = statistics.median(st["times_ms"]), min(st["times_ms"])
                    rec[s]["all_ms"] += st["times_ms"]
                    rec[s]["rss_after_import_kib"] = st.get("rss_after_import_kib")
                    rec[s]["info"] = {k: v for k, v in st.items() if k not in ("times_ms",)}
                rec[s]["round_median_ms"].append(med)
                rec[s]["round_min_ms"].append(mn)
                rec[s]["peak_rss_kib"].append(rss)
                rec[s]["cpu_percent"].append(timed_process.cpu_percent)
                emb = np.load(emb_p)
                if emb.dtype == np.uint16:  # bf16 bits: widen to f32
                    emb = bf16_to_f32(emb)
                embs[s] = emb
            loads.append(os.getloadavg()[0])
            log(f"run.py: b{B} round {r + 1}/{a.rounds}: " +
                ", ".join(f"{s} {rec[s]['round_median_ms'][-1]:.1f}" for s in systems) +
                f" ms (load {loads[-1]:.2f})")

        # Agreement.
        ref_name = "torch" if "torch" in embs else systems[0]
        ref = embs[ref_name].astype(np.float64)
        agree = {}
        for s in systems:
            e = embs[s].astype(np.float64)
            cos = (e * ref).sum(1) / np.linalg.norm(e, axis=1) / np.linalg.norm(ref, axis=1)
            agree[s] = {"min_cosine_vs_" + ref_name: float(cos.min()),
                        "max_abs_diff_vs_" + ref_name: float(np.abs(e - ref).max())}
        ok = all(v["min_cosine_vs_" + ref_name] > 0.9999 for s, v in agree.items()
                 if s not in QUANTIZED + BF16 + list(VARIANT_OF))
        log(f"run.py: b{B} embeddings agree (cosine vs {ref_name} > 0.9999, unquantized systems): "
            f"{'yes' if ok else 'NO'} " +
            ", ".join(f"{s} {agree[s]['min_cosine_vs_' + ref_name]:.7f}" for s in systems))

        summ = {}
        for s in systems:
            med = statistics.median(rec[s]["round_median_ms"])
            summ[s] = {
                "median_ms": med,
                "min_ms": min(rec[s]["round_min_ms"]),
                "round_median_range_ms": [min(rec[s]["round_median_ms"]), max(rec[s]["round_median_ms"])],
                "throughput_sps": B * 1000.0 / med,
                "peak_rss_mib": max(rec[s]["peak_rss_kib"]) / 1024.0,
                "runtime_baseline_rss_mib": (rec[s]["rss_after_import_kib"] / 1024.0
                                             if rec[s].get("rss_after_import_kib") else None),
            }
        if "tfc-fused" in summ:
            for s in systems:
                summ[s]["tfc_fused_speedup"] = summ[s]["median_ms"] / summ["tfc-fused"]["median_ms"]
                summ[s]["tfc_fused_speedup_min"] = summ[s]["min_ms"] / summ["tfc-fused"]["min_ms"]
        results["batches"][str(B)] = {"sentences": sents, "seq": seq, "tokens": mask.sum(1).tolist(), "build": build,
                                      "summary": summ, "rounds": rec, "agreement": agree,
                                      "agree_ok": ok, "loadavg_per_round": loads}

    meta["loadavg_end"] = os.getloadavg()
    meta["tfc_bin_mtime_end"] = bin_mtimes(a.bin)
    # A rebuild between two uses of a binary mixes builds in one table; one
    # after its last use (or before its first) does not.
    names = [b for b, _ in used_bins]
    mixed = sorted({b for b in names if names.count(b) > 1})
    meta["tfc_bins_used"] = sorted([list(x) for x in used_bins])
    if mixed:
        meta["warning"] = "tfc binaries were rebuilt between uses in this run: " + ", ".join(mixed)
        log(f"run.py: warning: {meta['warning']}: {meta['tfc_bins_used']}")
    md = render(results, systems)
    print(md)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    base = os.path.join(a.results, f"minilm-{stamp}-t{T}")
    with open(base + ".json", "w") as f:
        json.dump(results, f, indent=1)
    with open(base + ".md", "w") as f:
        f.write(md)
    if not a.no_latest:
        shutil.copyfile(base + ".md", os.path.join(a.results, "latest.md"))
    log(f"run.py: wrote {base}.md, {base}.json")


def render(res, systems):
    m = res["meta"]
    v = m["versions"]
    L = []
    lengths = f" (tfc built for {m['tfc_lengths']})" if m.get("tfc_lengths") else ""
    if m.get("tfc_batches"):
        lengths += f" (tfc built for batch sizes {m['tfc_batches']})"
    L.append(f"### all-MiniLM-L6-v2, seq {m['seq_len']}{lengths}, {m['threads']} threads — {m['date_utc']}\n")
    L.append(f"{m['cpu']}, {m['nproc']} CPUs; tfc {m['tfc_git']}; torch {v.get('torch')} "
             f"(BLAS {v.get('torch_blas', m.get('torch_blas'))}), onnxruntime {v.get('onnxruntime')}; "
             f"{m['rounds']} interleaved rounds x ({m['warmup_per_round']} warm-up + "
             f"{m['runs_per_round']} timed runs) per system; "
             f"load average {m['loadavg_start'][0]:.2f} at start, {m['loadavg_end'][0]:.2f} at end."
             + (f" **Warning: {m['warning']}.**" if m.get("warning") else "") + "\n")
    L.append("| batch | system | median ms | min ms | round medians ms | sentences/s | peak RSS MiB | "
             "tfc fused speedup (median) | (min) | min cosine vs PyTorch | max abs diff vs PyTorch |")
    L.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for B, r in res["batches"].items():
        for s in systems:
            x = r["summary"][s]
            ag = next(iter(v2 for k2, v2 in r["agreement"][s].items() if k2.startswith("min_cosine")))
            dif = next(iter(v2 for k2, v2 in r["agreement"][s].items() if k2.startswith("max_abs")))
            rss = f"{x['peak_rss_mib']:.0f}"
            if x["runtime_baseline_rss_mib"]:
                rss += f" ({x['runtime_baseline_rss_mib']:.0f} before load)"
            sp = x.get("tfc_fused_speedup")
            sp = "—" if s == "tfc-fused" else (f"{sp:.2f}x" if sp is not None else "")
            fz = r["summary"].get("tfc-fused")
            spm = x["min_ms"] / fz["min_ms"] if fz else None
            spm = "—" if s == "tfc-fused" else (f"{spm:.2f}x" if spm is not None else "")
            lo, hi = x["round_median_range_ms"]
            batch = f"{B} x {r['seq']} tokens" if m["seq_len"] == "longest" else B
            L.append(f"| {batch} | {LABELS[s]} | {x['median_ms']:.1f} | {x['min_ms']:.1f} | {lo:.1f}–{hi:.1f} | "
                     f"{x['throughput_sps']:.1f} | {rss} | {sp} | {spm} | "
                     + ("reference | reference |" if s == "torch" else f"{ag:.8f} | {dif:.1e} |"))
    L.append("")
    L.append("median: median over rounds of each round's median; min: the fastest single run; "
             "sentences/s: batch / median; speedup: the system's median (min) / tfc fused's "
             "(> 1: tfc fused is faster). Peak RSS: the whole process (`/usr/bin/time -v`), the largest "
             "over rounds; for the Python peers it includes the interpreter and the framework "
             "(the value in brackets is the RSS after imports, before the model is loaded).")
    for B, r in res["batches"].items():
        L.append(f"Batch {B}: embeddings of the unquantized systems agree (cosine > 0.9999 vs PyTorch): "
                 f"{'yes' if r['agree_ok'] else 'NO'}.")
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    main()
