#!/usr/bin/env bash
# tda vs PyTorch on this CPU: one GPT-2-162M training step (configs/d12_bench.json: B = 4, fp32)
# at T = 64 and T = 256, tda's `bench train` and scripts/bench/torch_cpu_step.py (the same model
# in PyTorch eager, Debian's CPU torch in .venv) run alternately, ROUNDS times each, so that a
# busy machine slows both alike. Prints each run, then per T the medians, the ratio (torch ms /
# tda ms: > 1 means tda is faster), tda's GFLOP/s and its share of the SGEMM rate that the same
# tda runs measured (the LM head's shape, docs/perf.md). The load average is printed before and
# after: on a shared machine, read the numbers with it. BASE=another/tda adds a third binary to
# each round (a build of main: before/after of a change on the same load) and its own rows.
# Usage: scripts/bench/cpu_vs_torch.sh [ROUNDS=3] [TDA=build/tda]
#        (THREADS=2, PYTHON=.venv/bin/python, BASE unset)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-3}
TDA=${2:-build/tda}
THREADS=${THREADS:-2}
PYTHON=${PYTHON:-.venv/bin/python}
BASE=${BASE:-}
for b in "$TDA" $BASE; do
  [ -x "$b" ] || { echo "cpu_vs_torch: $b is not an executable (build it first)" >&2; exit 2; }
done
"$PYTHON" -c 'import torch' 2>/dev/null ||
  { echo "cpu_vs_torch: $PYTHON cannot import torch" >&2; exit 2; }
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; tda $TDA${BASE:+; base $BASE}; threads $THREADS"
tda_step() {  # WHO BINARY T
  "$2" bench train --config configs/d12_bench.json --steps 3 --set model.seq_len=$3 \
      --set train.total_batch_tokens=$((4 * $3)) --set train.threads="$THREADS" 2>/dev/null |
      grep '^{' | sed "s/^/$1 $3 /" | tee -a "$LOG"
}
for T in 64 256; do
  for r in $(seq "$ROUNDS"); do
    tda_step tda "$TDA" $T
    [ -z "$BASE" ] || tda_step base "$BASE" $T
    "$PYTHON" scripts/bench/torch_cpu_step.py --B 4 --T $T --threads "$THREADS" --steps 3 |
        sed "s/^/torch $T /" | tee -a "$LOG"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$PYTHON" - "$LOG" <<'EOF'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    who, T, js = line.split(" ", 2)
    runs.setdefault((who, int(T)), []).append(json.loads(js))
rows = ["tda", "base"] if any(w == "base" for w, _ in runs) else ["tda"]
print("| T | binary | ms/step (median of runs) | torch ms/step | torch/tda | tda GFLOP/s | SGEMM GFLOP/s | tda/SGEMM |")
print("|---|---|---|---|---|---|---|---|")
for T in sorted({t for _, t in runs}):
    torch = [r["ms_per_step_median"] for r in runs[("torch", T)]]
    p = statistics.median(torch)
    for who in rows:
        tda = [r["ms_per_step_median"] for r in runs[(who, T)]]
        gf = [r["gflops"] * r["ms_per_step"] / r["ms_per_step_median"] for r in runs[(who, T)]]
        sg = [r["sgemm_gflops"] for r in runs[(who, T)]]
        t = statistics.median(tda)
        print("| %d | %s | %.0f (%s) | %.0f (%s) | %.2f | %.1f | %.1f | %.2f |" % (
                T, who, t, ", ".join("%.0f" % x for x in tda), p, ", ".join("%.0f" % x for x in torch),
                p / t, statistics.median(gf), statistics.median(sg),
                statistics.median(gf) / statistics.median(sg)))
EOF
