#!/usr/bin/env bash
# compute-sanitizer over tda's CUDA path, for the GPU kit (scripts/gpu/check.sh): each
# (tool, dtype, kind) is `build-cuda/tda train` of configs/tiny/KIND.json for 2 steps (64 tokens
# per sequence, 2 sequences), JOBS runs at a time, in the order given (tools first, so memcheck
# covers every kind before the next tool starts). A run that would start after DEADLINE (epoch
# seconds) is recorded as "not run"; each run gets at most 90 s. One JSON line per run in
# WORK/sanitizer.jsonl, its output in WORK/sanitizer/TOOL-KIND-DTYPE.log (report.py reads the
# "ERROR SUMMARY" there).
# racecheck runs fp32 only (whatever DTYPES says) and skips the vendor's GEMM kernels (cuBLASLt's
# nvjet/xmma/cutlass kernels); measured on an H200, CUDA 13.0's sanitizer, 2026-11-26:
#   - checked, cuBLASLt's nvjet_sm90_*_splitK kernels report 512 shared-memory hazards per launch
#     (theirs, not ours to fix), and every run timed out before it reached our kernels;
#   - excluded in bf16, the sanitizer fails with "failed to handle a hardware exception" at the
#     first bf16 GEMM (an internal error of the tool: memcheck is clean there, and the results
#     match the CPU);
#   - excluded in fp32 it runs (softmax's tiny config: 0 hazards), and checks all of ours (the attention kernels take bf16 tensor-core
#     products in fp32 runs too; the bf16-only kernels are element-wise, no shared memory).
# memcheck, synccheck and initcheck check every kernel: initcheck must see cuBLASLt's writes, or
# it calls the logits the GEMM wrote uninitialised.
# A log over 1 MiB keeps its first 400 and last 50 lines. Afterwards no process a run started may
# live on (a timed-out sanitizer can leave its target behind, on the GPU the timings use next).
# Exit 1 when any run had errors, timed out or failed.
# Usage: scripts/gpu/sanitize.sh WORK DEADLINE JOBS "TOOLS" "DTYPES" "KINDS"
set -uo pipefail
cd "$(dirname "$0")/../.."
[ $# -eq 6 ] || { echo "usage: sanitize.sh WORK DEADLINE JOBS TOOLS DTYPES KINDS" >&2; exit 2; }
WORK=$1 DEADLINE=$2 JOBS=$3 TOOLS=$4 DTYPES=$5 KINDS=$6
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[ -x "$SAN" ] || { echo "sanitize: compute-sanitizer not found" >&2; exit 1; }
mkdir -p "$WORK/sanitizer"

one() {  # tool kind dtype
  local tool=$1 kind=$2 dtype=$3 name="$1-$2-$3"
  local t=$((DEADLINE - $(date +%s)))
  [ "$t" -gt 90 ] && t=90
  if [ "$t" -lt 10 ]; then
    printf '{"tool": "%s", "kind": "%s", "dtype": "%s", "status": "not run"}\n' \
      "$tool" "$kind" "$dtype" >>"$WORK/sanitizer.jsonl"
    return
  fi
  local s0 rc=0 skip=()
  [ "$tool" = racecheck ] && skip=(--kernel-name-exclude "regex=$VENDOR_KERNELS")
  s0=$(date +%s)
  timeout -k 5 "$t" "$SAN" --tool "$tool" --print-limit 10 "${skip[@]}" \
    build-cuda/tda train -c "configs/tiny/$kind.json" -o "$WORK/sanitizer/run-$name" \
    --device cuda --dtype "$dtype" --steps 2 --set model.seq_len=64 --set train.micro_batch=2 \
    --set train.total_batch_tokens=128 --set train.val_every=0 \
    >"$WORK/sanitizer/$name.log" 2>&1 || rc=$?
  local log="$WORK/sanitizer/$name.log"
  if [ "$(stat -c %s "$log")" -gt 1048576 ]; then
    { head -n 400 "$log"; echo "[sanitize.sh: $(stat -c %s "$log") bytes, cut to the first 400 and last 50 lines]"
      tail -n 50 "$log"; } >"$log.cut" && mv "$log.cut" "$log"
  fi
  rm -rf "$WORK/sanitizer/run-$name"
  printf '{"tool": "%s", "kind": "%s", "dtype": "%s", "rc": %d, "seconds": %d, "log": "sanitizer/%s.log"}\n' \
    "$tool" "$kind" "$dtype" "$rc" $(($(date +%s) - s0)) "$name" >>"$WORK/sanitizer.jsonl"
}
VENDOR_KERNELS='nvjet|cublas|cutlass|xmma|gemv|splitKreduce'
export -f one
export WORK DEADLINE SAN VENDOR_KERNELS
for tool in $TOOLS; do
  dtypes=$DTYPES
  [ "$tool" = racecheck ] && dtypes=fp32
  for dtype in $dtypes; do for kind in $KINDS; do echo "$tool $kind $dtype"; done; done
done | xargs -P "$JOBS" -L 1 bash -c 'one "$0" "$1" "$2"'
# Every run's target is a `tda train -o WORK/sanitizer/run-...`: none may outlive its run.
left=$(pgrep -f "$WORK/sanitizer/run-" | grep -vx "$$" | wc -l)
if [ "$left" -gt 0 ]; then
  echo "sanitize: $left process(es) outlived their run; killed:"
  pgrep -af "$WORK/sanitizer/run-" | grep -v "^$$ "
  pkill -KILL -f "$WORK/sanitizer/run-"
  sleep 1
fi
errors=$(grep -l "ERROR SUMMARY: [1-9]\|RACECHECK SUMMARY: [1-9]" "$WORK"/sanitizer/*.log 2>/dev/null |
  wc -l)
failed=$(grep -v '"status": "not run"' "$WORK/sanitizer.jsonl" | grep -vc '"rc": 0,')
echo "sanitize: $(wc -l <"$WORK/sanitizer.jsonl") runs recorded, $errors with errors, $failed timed out or failed"
[ "$errors" = 0 ] && [ "$failed" = 0 ]
