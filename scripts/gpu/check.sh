#!/usr/bin/env bash
# The GPU kit's one command (docs/gpu.md): on one GPU, build tda, check its CUDA path and time it
# beside PyTorch, within a time budget (default 560 s: 10 minutes on one H100 with margin), and
# write one report. Most valuable first; every stage has a budget, and the report is rewritten
# after each stage, so a run cut short still leaves what finished:
#   a. environment: GPU, driver, toolkit, compilers (nvidia-smi, nvcc; tda's start-up line later)
#   b. build (scripts/gpu/build.sh: build/ and build-cuda/ at once, all cores); meanwhile, on the
#      otherwise idle GPU, PyTorch's SDPA and an eager GPT-2 step (scripts/gpu/torch_ref.py)
#   c. ctest -L gpu (tests/test_gpu.cpp: GPU vs CPU binary)
#   d. compute-sanitizer memcheck, racecheck, synccheck, initcheck: every kind, fp32 and bf16,
#      tiny config, 2 steps (runs that do not fit the budget are listed as not run)
#   e. timings: tda bench attention --mode time (every kind, T 512..16384), the paper's Table 5
#      (TRA, TDA, softmax ours/cuDNN at T 1k-16k, full mode 64k too, random and trained q, k:
#      scripts/gpu/table5.sh) and tda bench train (d12, B 16, T 1024, bf16: softmax on our
#      kernels and on cuDNN, tda; each also profiled op by op: scripts/gpu/bench_train.sh);
#      last, PyTorch's step under torch.compile
#   f. report: OUT/report.md, OUT/report.json, OUT/logs.tar.gz (3 files: the device tool brings
#      back at most 8)
# Usage: scripts/gpu/check.sh [--out DIR] [--quick] [--budget SECONDS] [--kit DIR] [--no-build]
#                            [--skip STAGES]
#   --quick: T 1024 and 4096, memcheck and racecheck in bf16, no d12 test, no torch.compile
#            (about half the time)
#   --no-build: use the build/ and build-cuda/ already there
#   --skip: comma-separated stages not to run (torch-sdpa, torch-eager, gpu-tests, sanitizer,
#           tda-attention, table5, tda-train, torch-compile), e.g. a rerun after a fix
set -uo pipefail
cd "$(dirname "$0")/../.."

OUT=gpu-report
QUICK=0
BUDGET=560
KIT=.gpukit
BUILD=1
SKIP=,
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --budget) BUDGET=$2; shift 2 ;;
    --kit) KIT=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    --skip) SKIP=",$2,"; shift 2 ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "check: unknown argument '$1' (--out DIR --quick --budget S --kit DIR --no-build --skip STAGES)" >&2
       exit 2 ;;
  esac
done
WORK=build-gpukit
rm -rf "$WORK"
mkdir -p "$WORK/logs" "$WORK/sanitizer" "$OUT"
OUT=$(cd "$OUT" && pwd)
T0=$(date +%s)
DEADLINE=$((T0 + BUDGET))
NPROC=$(nproc)
PY=${PYTHON:-python3}
if [ "$QUICK" = 1 ]; then
  LENGTHS=1024,4096; TOOLS="memcheck racecheck"; DTYPES=bf16; STEPS=5
  T5_LENGTHS=1024,4096,16384
else
  LENGTHS=512,1024,2048,4096,8192,16384; TOOLS="memcheck racecheck synccheck initcheck"
  DTYPES="bf16 fp32"; STEPS=10
  T5_LENGTHS=1024,4096,16384,65536
fi
# SDPA at every length either attention stage times (Table 5's beyond the per-kind table's)
SDPA_LENGTHS=$(echo "$LENGTHS,$T5_LENGTHS" | tr ',' '\n' | sort -nu | paste -sd,)
T5_TRAIN_STEPS=300  # each Table 5 kind's tiny model (a few seconds on a GPU)
VENDOR_KINDS=""  # the kinds cuDNN attention can run (their math), once the build is there
KINDS=""  # every registered kind (`tda kinds`), once the build is there: the baseline and the
          # paper's two first (a stage cut by its budget leaves out the others), then its order

log() { echo "[gpu-check $(($(date +%s) - T0))s] $*"; }
left() { echo $((DEADLINE - $(date +%s))); }
report() {
  "$PY" scripts/gpu/report.py --work "$WORK" --out "$OUT" 2>>"$WORK/logs/report.err" ||
    log "report.py failed: $WORK/logs/report.err"
  tar czf "$OUT/logs.tar.gz" -C "$WORK" . 2>/dev/null
}
# stage NAME BUDGET NOTE COMMAND...: runs COMMAND under a timeout of min(BUDGET, time left - 15 s
# per stage still to come), records the outcome in stages.jsonl and rewrites the report.
STAGES_AFTER=0
stage() {
  local name=$1 budget=$2 note=$3
  shift 3
  local t=$(($(left) - 15 * STAGES_AFTER))
  [ "$t" -gt "$budget" ] && t=$budget
  local status rc=0 s0
  s0=$(date +%s)
  if [[ "$SKIP" == *",$name,"* ]]; then
    status=skipped
    note="--skip"
  elif [ "$t" -lt 5 ]; then
    status=skipped
    note="no time left"
  else
    log "$name (budget ${t} s)"
    timeout -k 10 "$t" "$@" >"$WORK/logs/$name.log" 2>&1
    rc=$?
    case $rc in 0) status=ok ;; 124|137) status=timeout ;; *) status=fail ;; esac
  fi
  printf '{"stage": "%s", "status": "%s", "seconds": %d, "budget_s": %d, "note": "%s"}\n' \
    "$name" "$status" $(($(date +%s) - s0)) "$t" "$note" >>"$WORK/stages.jsonl"
  log "$name: $status"
  report
  return $rc
}

# --- a. environment -----------------------------------------------------------------------------
# The tiny configs and the gpu tests read data/tinyshakespeare/*.bin, which is git-ignored.
mkdir -p data/tinyshakespeare
for f in "$KIT"/data/*.bin; do
  [ -e "data/tinyshakespeare/$(basename "$f")" ] || cp "$f" data/tinyshakespeare/
done
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "gpu: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
  echo "gpus: $(nvidia-smi -L 2>/dev/null | wc -l)"
  echo "driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)"
  echo "gpu memory: $(nvidia-smi --query-gpu=memory.total --format=csv,noheader 2>/dev/null | head -1)"
  echo "compute capability: $(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1)"
  echo "nvcc: $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' | head -1)"
  echo "torch: $("$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>/dev/null)"
  echo "cxx: $(c++ --version 2>/dev/null | head -1)"
  echo "cmake: $(cmake --version 2>/dev/null | head -1)"
  echo "compute-sanitizer: $(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || echo missing)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $NPROC cores"
  echo "mode: $([ "$QUICK" = 1 ] && echo quick || echo full), budget $BUDGET s"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo ' (+ local changes)')"
} >"$WORK/env.txt"
nvidia-smi >"$WORK/logs/nvidia-smi.txt" 2>&1
if grep -q '^gpu: *$' "$WORK/env.txt"; then
  log "no NVIDIA GPU visible (nvidia-smi): the GPU stages will fail or be skipped; run this on a GPU node"
else
  log "$(grep '^gpu:' "$WORK/env.txt")"
fi
report

# --- b. build, with PyTorch's references on the idle GPU meanwhile ------------------------------
torch_refs() {
  stage torch-sdpa 60 "SDPA flash, T $SDPA_LENGTHS" \
    bash -c "$PY scripts/gpu/torch_ref.py attention --T $SDPA_LENGTHS > $WORK/sdpa.jsonl"
  stage torch-eager 60 "GPT-2 d12 step, eager" \
    bash -c "$PY scripts/gpu/torch_ref.py train --steps $STEPS >> $WORK/torch_train.jsonl"
}
STAGES_AFTER=5
if [ "$BUILD" = 1 ]; then
  torch_refs &
  TORCH_PID=$!
  stage build 270 "build/ (CPU + tests) and build-cuda/, $NPROC jobs" \
    bash scripts/gpu/build.sh --kit "$KIT" --log-dir "$WORK/logs"
  wait "$TORCH_PID"  # its own timeouts bound it; the GPU stages must not share the GPU with it
else
  torch_refs
fi
[ -f build-kit/env.sh ] && . build-kit/env.sh
echo "packages: $([ "${TDA_KIT_USED:-0}" = 1 ] && echo "the kit's ($KIT)" || echo "the node's")" \
  >>"$WORK/env.txt"
export TDA_CUDA_BINARY=$PWD/build-cuda/tda
if [ -x build-cuda/tda ]; then
  KINDS=$(build-cuda/tda kinds --names |
    awk 'BEGIN { p["softmax"] = 1; p["tda"] = 2; p["tra"] = 3 } { print (p[$0] ? p[$0] : 9), NR, $0 }' |
    sort -n -k1,1 -k2,2 | cut -d' ' -f3 | tr '\n' ' ')
  # the kinds cuDNN can run: kernel math softmax or diff_softmax (`tda kinds --json`)
  VENDOR_KINDS=$(build-cuda/tda kinds --json | "$PY" -c 'import json, sys
print(" ".join(r["name"] for r in json.load(sys.stdin) if r["math"] in ("softmax", "diff_softmax")))')
  start=$(build-cuda/tda bench attention --device cuda --mode time --kind softmax --T 64 \
    --tokens 64 --heads 2 --reps 1 --warmup 1 2>&1 | grep -m1 '^cuda:\|error')
  echo "tda start-up: $start" >>"$WORK/env.txt"
  log "$start"
fi
report

# --- c. the gpu tests ---------------------------------------------------------------------------
STAGES_AFTER=4
EXCLUDE=()
[ "$QUICK" = 1 ] && EXCLUDE=(-E "d12")
if [ -x build/tda_tests ] && [ -x build-cuda/tda ]; then
  stage gpu-tests 200 "ctest -L gpu -j 4" \
    ctest --test-dir build -L gpu -j 4 --timeout 190 "${EXCLUDE[@]}" --output-on-failure \
    --output-junit "$PWD/$WORK/ctest.xml"
else
  printf '{"stage": "gpu-tests", "status": "skipped", "seconds": 0, "note": "no build"}\n' \
    >>"$WORK/stages.jsonl"
fi

# --- d. compute-sanitizer -----------------------------------------------------------------------
STAGES_AFTER=3
if [ -x build-cuda/tda ]; then
  budget=$([ "$QUICK" = 1 ] && echo 60 || echo 120)
  t=$(($(left) - 15 * STAGES_AFTER)); [ "$t" -gt "$budget" ] && t=$budget
  # Runs that would start after the deadline are recorded as not run; the last ones started
  # may take up to 90 s more, which the stage's own timeout allows.
  stage sanitizer "$((t + 60))" "$(echo $TOOLS), $(echo $DTYPES), $((NPROC / 2)) at a time" \
    bash scripts/gpu/sanitize.sh "$WORK" "$(($(date +%s) + t))" "$((NPROC / 2))" "$TOOLS" \
    "$DTYPES" "$KINDS"
else
  printf '{"stage": "sanitizer", "status": "skipped", "seconds": 0, "note": "no build-cuda/tda"}\n' \
    >>"$WORK/stages.jsonl"
fi

# --- e. timings -----------------------------------------------------------------------------------
STAGES_AFTER=2
# Timings need the GPU to themselves: record (and end) any process still on it.
busy=$(nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader 2>/dev/null)
echo "gpu processes before the timings: ${busy:-none}" | tr '\n' ';' >>"$WORK/env.txt"
echo >>"$WORK/env.txt"
if [ -n "$busy" ]; then
  log "processes still on the GPU before the timings (killed): $busy"
  pkill -KILL -f "build-cuda/tda train" 2>/dev/null
  sleep 2
fi
if [ -x build-cuda/tda ]; then
  # One process per kind: a kind that fails leaves the others' lines (the failure is in the log).
  # every kind on our kernels, then the softmax family on cuDNN's (a node without cuDNN: those
  # runs fail, saying why, and the stage with them; the other lines stay)
  # our kernels at every forward block shape (rows x keys: 64x64, 128x64, 64x128; a kind that
  # cannot take one gets no line for it): the report's "Forward block shape" table picks; and
  # both backwards (attention.deterministic 1: two kernels, 0: one with dq by atomics), each with
  # one and two query tiles in flight (attention.bwd_stages), which the "Backward kernels" table
  # compares
  stage tda-attention 150 "every kind, T $LENGTHS, 16 heads, 16k tokens, forward blocks 64x64/128x64/64x128, backward split/atomic x 1/2 stages; softmax family on cuDNN" \
    bash -c "rc=0
    for k in $KINDS; do build-cuda/tda bench attention --device cuda --mode time --kind \$k \
      --T $LENGTHS --fwd-shapes 64x64,128x64,64x128 --deterministic 1,0 --bwd-stages 1,2 >> $WORK/tda_attention.jsonl || { echo \"failed: \$k\"; rc=1; }; done
    for k in $VENDOR_KINDS; do build-cuda/tda bench attention \
      --device cuda --mode time --impl cudnn --kind \$k --T $LENGTHS \
      >> $WORK/tda_attention.jsonl || { echo \"failed: \$k (cudnn)\"; rc=1; }; done; exit \$rc"
  # the tuning table from those lines (tda tune --from: nothing timed again), into the report
  build-cuda/tda tune --from "$WORK/tda_attention.jsonl" --out "$WORK/tuning.json" \
    >"$WORK/logs/tune.log" 2>&1 || log "tda tune --from failed: see logs/tune.log"
  # the paper's Table 5: its kinds at its lengths, random and trained q, k
  STAGES_AFTER=1
  stage table5 "$([ "$QUICK" = 1 ] && echo 60 || echo 100)" \
    "tra, tda, softmax own/cudnn, T $T5_LENGTHS, random + trained q, k" \
    bash scripts/gpu/table5.sh "$WORK" "$LENGTHS" "$T5_LENGTHS" "$T5_TRAIN_STEPS"
  # softmax on our kernels and on cuDNN, tda on ours; each timed, then profiled op by op
  stage tda-train 150 "d12 B 16 T 1024 bf16: softmax own/cudnn, tda; $STEPS steps + 3 profiled" \
    bash scripts/gpu/bench_train.sh "$WORK" "$STEPS"
fi
STAGES_AFTER=0
if [ "$QUICK" = 0 ]; then
  stage torch-compile 150 "torch.compile GPT-2 step" \
    bash -c "$PY scripts/gpu/torch_ref.py train --compile --steps $STEPS >> $WORK/torch_train.jsonl"
fi

# --- f. report ------------------------------------------------------------------------------------
report
log "done in $(($(date +%s) - T0)) s: $OUT/report.md"
sed -n '/^## Stages/,/^## compute-sanitizer/p' "$OUT/report.md" | head -40
