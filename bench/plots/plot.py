#!/usr/bin/env python3
"""Draws the headline comparisons of docs/performance/ from the benchmarks'
JSON files, as PNG:

  fused-vs-unfused.png  attention's fused build against its unfused one
                        (--no-fusion) over the sequence length: the time of
                        each and the speedup, one line per `tfc-bench
                        --kernel=attention --json` file (plain, causal, ...);
  tfc-vs-peers.png      all-MiniLM-L6-v2 on tfc, PyTorch and ONNX Runtime:
                        the median time of each system per batch, with the
                        range of its round medians, one row per
                        bench/minilm/run.py result.

  python plot.py [--out-dir DIR] PATH...

Each PATH is a JSON file or a directory of them, told apart by their
content; a `meta.json` (bench/plots/measure.sh writes one: the machine, the
date, the tfc commit) names the machine in the attention plot's title.
Other kernels' tfc-bench files are passed over. Needs matplotlib (the bench
venv has it: bench/minilm/setup_peers.sh).
"""
import argparse
import json
import os
import sys

FUSION_PNG = "fused-vs-unfused.png"
PEERS_PNG = "tfc-vs-peers.png"

# bench/minilm/run.py's systems, in the order drawn, with their labels.
SYSTEM_LABELS = {
    "tfc-fused": "tfc",
    "tfc-unfused": "tfc unfused",
    "tfc-int8": "tfc int8",
    "tfc-int8-noamx": "tfc int8 (no AMX)",
    "tfc-bf16": "tfc bf16",
    "tfc-bf16-noamx": "tfc bf16 (no AMX)",
    "torch": "PyTorch",
    "torch-bf16": "PyTorch bf16",
    "ort": "ONNX Runtime",
    "ort-int8": "ONNX Runtime int8",
}


def fail(message):
    sys.exit(f"plot.py: {message}")


def system_color(name):
    """tfc's systems in blues, PyTorch's in oranges, ONNX Runtime's in greens."""
    families = {"tfc": ["#1f77b4", "#6baed6", "#08519c", "#4292c6", "#2171b5", "#9ecae1"],
                "torch": ["#ff7f0e", "#fdae6b"], "ort": ["#2ca02c", "#74c476"]}
    family = name.split("-")[0]
    shades = families.get(family, ["#7f7f7f"])
    members = [s for s in SYSTEM_LABELS if s.split("-")[0] == family]
    index = members.index(name) if name in members else 0
    return shades[index % len(shades)]


def load(paths):
    """The attention sweeps, the MiniLM results and the meta of `paths`."""
    files = []
    for path in paths:
        if os.path.isdir(path):
            files += sorted(os.path.join(path, f) for f in os.listdir(path)
                            if f.endswith(".json"))
        elif os.path.isfile(path):
            files.append(path)
        else:
            fail(f"{path}: no such file or directory")
    sweeps, peers, meta = [], [], {}
    for f in files:
        try:
            with open(f) as fh:
                data = json.load(fh)
        except (OSError, ValueError) as e:
            fail(f"{f}: not JSON ({e})")
        if isinstance(data, dict) and "kernel" in data and "rows" in data:
            if data["kernel"] == "attention":
                sweeps.append((f, data))
            else:
                print(f"plot.py: {f}: {data['kernel']}, not attention: passed over",
                      file=sys.stderr)
        elif isinstance(data, dict) and "meta" in data and "batches" in data:
            peers.append((f, data))
        elif isinstance(data, dict) and "host" in data and "tfc_git" in data:
            meta = data
        else:
            fail(f"{f}: neither a tfc-bench --json file, a bench/minilm/run.py "
                 "result nor a measure.sh meta.json")
    # The plain sweep first, then causal, windowed, capped ones.
    sweeps.sort(key=lambda fd: (fd[1]["dtype"], bool(fd[1].get("causal")),
                                fd[1].get("window") or 0, fd[1].get("softcap") or 0))
    return sweeps, peers, meta


def key_length(shape):
    """The keys of a tfc-bench attention shape: S of BxHxSxD, Skv of
    BxHxSqxSkvxD and BxHqxHkvxSqxSkvxD."""
    dims = [int(d) for d in shape.split("x")]
    return dims[2] if len(dims) == 4 else dims[-2]


def sweep_label(data):
    parts = [data["dtype"]]
    if data.get("causal"):
        parts.append("causal")
    if data.get("window"):
        parts.append(f"window {data['window']}")
    if data.get("softcap"):
        parts.append(f"softcap {data['softcap']:g}")
    if data.get("target") == "nvptx":
        parts.append("GPU")
    return ", ".join(parts)


def shapes_text(sweeps):
    """"B 1, H 12, D 64" when every row shares them, else ""."""
    fixed = set()
    for _, data in sweeps:
        for row in data["rows"]:
            dims = row["shape"].split("x")
            fixed.add((dims[0], dims[1], dims[-1]))
    if len(fixed) != 1:
        return ""
    b, h, d = fixed.pop()
    return f"B {b}, H {h}, D {d}"


def plot_fusion(plt, sweeps, meta, out):
    fig, (times, speedups) = plt.subplots(1, 2, figsize=(11, 4.2))
    for i, (_, data) in enumerate(sweeps):
        rows = sorted(data["rows"], key=lambda r: key_length(r["shape"]))
        s = [key_length(r["shape"]) for r in rows]
        color = f"C{i}"
        label = sweep_label(data)
        times.plot(s, [r["fused_ms"] for r in rows], "o-", color=color,
                   label=f"fused, {label}")
        times.plot(s, [r["unfused_ms"] for r in rows], "s--", color=color,
                   label=f"unfused, {label}")
        speedups.plot(s, [r["unfused_ms"] / r["fused_ms"] for r in rows], "o-",
                      color=color, label=label)
    lengths = sorted({key_length(r["shape"]) for _, d in sweeps for r in d["rows"]})
    for ax in (times, speedups):
        ax.set_xscale("log", base=2)
        ax.set_xticks(lengths, [str(s) for s in lengths])
        ax.minorticks_off()
        ax.set_xlabel("sequence length (keys)")
        ax.grid(True, alpha=0.3)
    times.set_yscale("log")
    times.set_ylabel("ms per call (median)")
    times.set_title("time")
    times.legend(fontsize=8)
    speedups.axhline(1, color="black", linewidth=0.8)
    speedups.set_ylabel("unfused time / fused time")
    speedups.set_title("speedup of the fused kernel")
    speedups.legend(fontsize=8)
    threads = sorted({d["threads"] for _, d in sweeps})
    title = "Attention, fused against unfused"
    details = [shapes_text(sweeps),
               "threads " + "/".join(str(t) for t in threads),
               meta.get("cpu", ""), meta.get("date_utc", "")]
    fig.suptitle(title + "\n" + "; ".join(x for x in details if x), fontsize=10)
    fig.tight_layout()
    save(fig, out)


def plot_peers(plt, peers, out):
    rows = len(peers)
    cols = max(len(res["batches"]) for _, res in peers)
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 3.8 * rows),
                             squeeze=False)
    for r, (_, res) in enumerate(peers):
        m = res["meta"]
        for c, (batch, result) in enumerate(res["batches"].items()):
            ax = axes[r][c]
            summary = result["summary"]
            systems = [s for s in SYSTEM_LABELS if s in summary]
            systems += [s for s in summary if s not in SYSTEM_LABELS]
            medians = [summary[s]["median_ms"] for s in systems]
            lo = [summary[s]["median_ms"] - summary[s]["round_median_range_ms"][0]
                  for s in systems]
            hi = [summary[s]["round_median_range_ms"][1] - summary[s]["median_ms"]
                  for s in systems]
            x = range(len(systems))
            ax.bar(x, medians, yerr=[lo, hi], capsize=3,
                   color=[system_color(s) for s in systems])
            for xi, value, top in zip(x, medians, hi):
                ax.annotate(f"{value:.1f}", (xi, value + top), textcoords="offset points",
                            xytext=(0, 3), ha="center", fontsize=8)
            ax.margins(y=0.12)
            ax.set_xticks(list(x))
            ax.set_xticklabels([SYSTEM_LABELS.get(s, s) for s in systems],
                               rotation=20, ha="right", fontsize=8)
            ax.set_ylabel("ms per batch (median of rounds)")
            ax.set_title(f"batch {batch} x {result['seq']} tokens, "
                         f"{m['threads']} threads", fontsize=9)
            ax.grid(True, axis="y", alpha=0.3)
        for c in range(len(res["batches"]), cols):
            axes[r][c].set_visible(False)
    m = peers[0][1]["meta"]
    fig.suptitle(f"all-MiniLM-L6-v2: tfc, PyTorch and ONNX Runtime\n"
                 f"{m.get('cpu', '')}, {m.get('date_utc', '')}", fontsize=10)
    fig.tight_layout()
    save(fig, out)


def save(fig, out):
    # No software version in the file: the same data draws the same bytes.
    fig.savefig(out, dpi=110, metadata={"Software": None})
    print(f"plot.py: wrote {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="+", metavar="PATH",
                    help="JSON files, or directories of them")
    ap.add_argument("--out-dir", default=".", help="where the PNGs go")
    a = ap.parse_args()
    sweeps, peers, meta = load(a.paths)
    if not sweeps and not peers:
        fail("nothing to plot: no attention sweep of tfc-bench and no "
             "bench/minilm/run.py result in " + " ".join(a.paths))
    try:
        import matplotlib
    except ImportError:
        fail("needs matplotlib (bash bench/minilm/setup_peers.sh installs it "
             "in bench/.venv)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(a.out_dir, exist_ok=True)
    if sweeps:
        plot_fusion(plt, sweeps, meta, os.path.join(a.out_dir, FUSION_PNG))
    if peers:
        plot_peers(plt, peers, os.path.join(a.out_dir, PEERS_PNG))


if __name__ == "__main__":
    main()
