#!/usr/bin/env bash
# Measures the comparisons docs/performance/ plots, then draws them:
#   - attention, fused against unfused, over the sequence length: tfc-bench
#     --kernel=attention on 1 x 12 x S x 64 (MiniLM's and BERT-base's
#     heads) for S from 128 to 4096, plain and causal (attention.json,
#     attention-causal.json);
#   - all-MiniLM-L6-v2 on tfc, PyTorch and ONNX Runtime, batches 1 and 8 of
#     128 tokens (bench/minilm/run.py: its minilm-*.json and .md table).
# The JSON files go to docs/performance/data/<date>-<host>/ with meta.json
# (the date, the machine, the tfc commit and the commands); plot.py then
# writes docs/performance/fused-vs-unfused.png and tfc-vs-peers.png.
#
#   bash bench/plots/measure.sh [--quick] [--host NAME] [--threads N]
#                               [--data DIR] [--out DIR] [--no-peers]
#
#   --quick     3 runs of S = 64, 128, 256 and one MiniLM round of batch 1,
#               into a temporary directory unless --data/--out say where:
#               checks that the chain works; its numbers are not to commit
#   --host      the machine's name in the data folder (default: hostname -s)
#   --threads   threads of every system (default 2, as the tables)
#   --no-peers  the attention sweeps only (no PyTorch, no ONNX Runtime)
#
# Python comes from the bench venv (bench/minilm/setup_peers.sh, run here:
# it installs what is missing and prints the venv's python); tfc-bench,
# tfc-compile and tfc-run from build/bin (TFC_BIN overrides).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN="${TFC_BIN:-$ROOT/build/bin}"

quick=0 peers=1 threads=2 host=$(hostname -s) data= out=
while (($#)); do
  case "$1" in
    --quick) quick=1 ;;
    --no-peers) peers=0 ;;
    --host) host=$2; shift ;;
    --host=*) host=${1#*=} ;;
    --threads) threads=$2; shift ;;
    --threads=*) threads=${1#*=} ;;
    --data) data=$2; shift ;;
    --data=*) data=${1#*=} ;;
    --out) out=$2; shift ;;
    --out=*) out=${1#*=} ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "measure.sh: unknown argument '$1' (see --help)" >&2; exit 1 ;;
  esac
  shift
done

log() { echo "measure.sh: $*" >&2; }

date=$(date -u +%Y-%m-%d)
if ((quick)); then
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/tfc-plots-XXXXXX")
  data=${data:-$scratch/data/$date-$host}
  out=${out:-$scratch}
  lengths=(64 128 256) repeat=3
  minilm=(--batches 1 --rounds 1 --runs 2 --warmup 1)
else
  data=${data:-$ROOT/docs/performance/data/$date-$host}
  out=${out:-$ROOT/docs/performance}
  lengths=(128 256 512 1024 2048 4096) repeat=9
  minilm=(--rounds 6 --runs 5)
fi
mkdir -p "$data" "$out"
[[ -x "$BIN/tfc-bench" ]] || { log "no $BIN/tfc-bench: build it first (ninja -C build tfc-bench tfc-run)"; exit 1; }

PY=$(bash "$ROOT/bench/minilm/setup_peers.sh")

shapes=
for s in "${lengths[@]}"; do shapes+="${shapes:+;}1x12x${s}x64"; done
commands=()
run() {
  commands+=("$*")
  log "$*"
  "$@"
}

run "$BIN/tfc-bench" --kernel=attention --threads="$threads" --repeat="$repeat" \
  "--shapes=$shapes" "--json=$data/attention.json"
run "$BIN/tfc-bench" --kernel=attention --causal --threads="$threads" \
  --repeat="$repeat" "--shapes=$shapes" "--json=$data/attention-causal.json"
if ((peers)); then
  work=$(mktemp -d "${TMPDIR:-/tmp}/tfc-minilm-XXXXXX")
  run "$PY" "$ROOT/bench/minilm/run.py" --threads "$threads" "${minilm[@]}" \
    --bin "$BIN" --results "$data" --work "$work" --no-latest
  rm -rf "$work"
fi

# What the numbers were measured on and with.
"$PY" - "$data/meta.json" "$host" "$ROOT" "${commands[@]}" <<'PY'
import datetime, json, os, platform, subprocess, sys

out, host, root, commands = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def sh(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, cwd=root).stdout.strip()
    except OSError:
        return ""
cpu = next((line.split(":", 1)[1].strip() for line in sh("lscpu").splitlines()
            if line.startswith("Model name:")), platform.processor())
head = sh("git", "rev-parse", "--short", "HEAD")
dirty = " (with uncommitted changes)" if sh("git", "status", "--porcelain", "-uno") else ""
meta = {"date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "host": host, "cpu": cpu, "nproc": os.cpu_count(), "tfc_git": head + dirty,
        "commands": [c.replace(root + "/", "") for c in commands]}
with open(out, "w") as f:
    json.dump(meta, f, indent=1)
    f.write("\n")
PY

"$PY" "$HERE/plot.py" --out-dir "$out" "$data"
log "data in $data, plots in $out"
