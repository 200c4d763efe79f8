#!/usr/bin/env bash
# Trains every registered kind (`tda kinds --names`) at the tiny scale for STEPS steps and prints final validation loss and attention
# sparsity (tda diag on the first 128 validation tokens) as one table.
# Usage: scripts/bench/tiny_all_kinds.sh [STEPS=200] [OUT=runs/tiny_all]
set -euo pipefail
cd "$(dirname "$0")/../.."
STEPS=${1:-200}
OUT=${2:-runs/tiny_all}
KINDS=$(./build/tda kinds --names)
# configs/tiny/<kind>.json where the kind has one, else the tiny base with the kind set (the same
# settings: tests/test_attention_kernels.cpp checks the files add only their `attention` block)
config_args() {
  if [ -f "configs/tiny/$1.json" ]; then echo "--config configs/tiny/$1.json"
  else echo "--config configs/tiny/base.json --set attention.kind=$1"; fi
}
printf "%-14s %10s %10s %12s\n" kind val_loss sparsity sec
for k in $KINDS; do
  s=$(date +%s)
  # shellcheck disable=SC2046
  ./build/tda train $(config_args "$k") --out "$OUT/$k" --set train.max_steps=$STEPS \
      --set train.val_every=$STEPS --set train.log_every=$STEPS >"$OUT.$k.log" 2>&1
  ck=$(ls -d "$OUT/$k"/checkpoints/step_* | tail -1)
  ./build/tda diag --checkpoint "$ck" --tokens-file data/tinyshakespeare/tiny_shakespeare_val.bin \
      --T 128 --out "$OUT/$k/diag.json" >/dev/null 2>&1 || true
  val=$(grep '"val"' "$OUT/$k/metrics.jsonl" | tail -1 | python3 -c 'import json,sys; print("%.4f" % json.loads(sys.stdin.read())["val_loss"])')
  sp=$(python3 -c "import json; d=json.load(open('$OUT/$k/diag.json')); print('%.4f' % d['means']['effective']['sparsity'])" 2>/dev/null || echo "n/a")
  printf "%-14s %10s %10s %12s\n" "$k" "$val" "$sp" "$(( $(date +%s) - s ))"
done
