#!/usr/bin/env bash
# compute-sanitizer over tda's CUDA path, for the GPU kit (scripts/gpu/check.sh): each
# (tool, dtype, kind) is `build-cuda/tda train` of configs/tiny/KIND.json for 2 steps (64 tokens
# per sequence, 2 sequences), JOBS runs at a time, in the order given (tools first, so memcheck
# covers every kind before the next tool starts). A run that would start after DEADLINE (epoch
# seconds) is recorded as "not run"; each run gets at most 90 s. One JSON line per run in
# WORK/sanitizer.jsonl, its output in WORK/sanitizer/TOOL-KIND-DTYPE.log (report.py reads the
# "ERROR SUMMARY" there).
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
  local s0 rc=0
  s0=$(date +%s)
  timeout -k 5 "$t" "$SAN" --tool "$tool" --print-limit 10 \
    build-cuda/tda train -c "configs/tiny/$kind.json" -o "$WORK/sanitizer/run-$name" \
    --device cuda --dtype "$dtype" --steps 2 --set model.seq_len=64 --set train.micro_batch=2 \
    --set train.total_batch_tokens=128 --set train.val_every=0 \
    >"$WORK/sanitizer/$name.log" 2>&1 || rc=$?
  rm -rf "$WORK/sanitizer/run-$name"
  printf '{"tool": "%s", "kind": "%s", "dtype": "%s", "rc": %d, "seconds": %d, "log": "sanitizer/%s.log"}\n' \
    "$tool" "$kind" "$dtype" "$rc" $(($(date +%s) - s0)) "$name" >>"$WORK/sanitizer.jsonl"
}
export -f one
export WORK DEADLINE SAN
for tool in $TOOLS; do for dtype in $DTYPES; do for kind in $KINDS; do
  echo "$tool $kind $dtype"
done; done; done | xargs -P "$JOBS" -L 1 bash -c 'one "$0" "$1" "$2"'
errors=$(cat "$WORK"/sanitizer/*.log 2>/dev/null | grep -c "ERROR SUMMARY: [1-9]")
echo "sanitize: $(wc -l <"$WORK/sanitizer.jsonl") runs recorded, $errors with errors"
[ "$errors" = 0 ]
