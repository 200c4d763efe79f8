#!/usr/bin/env bash
# The GPU kit's training stage (scripts/gpu/check.sh, docs/gpu.md): d12 (configs/gpt2_162m), bf16,
# B 16 x T 1024 on the bundled shards, for each run KIND:IMPL (attention.impl: own = our kernels,
# cudnn = cuDNN's fused attention), first STEPS timed steps, then 3 steps under --profile (every
# op timed by phase: the per-op table the report sets beside the roofline model). Appends each
# run's JSON line to WORK/tda_train.jsonl; the whole output of each run is WORK/train_KIND_IMPL.log
# (and _profile.log). A run that fails (no cuDNN on the node for cudnn) leaves its log and the
# others go on; the exit status is 1 if any failed.
# Usage: scripts/gpu/bench_train.sh WORK STEPS [KIND:IMPL ...]   (default softmax:own
#        softmax:cudnn tda:own)
set -uo pipefail
cd "$(dirname "$0")/../.."
WORK=$1
STEPS=$2
shift 2
RUNS=("$@")
[ ${#RUNS[@]} -gt 0 ] || RUNS=(softmax:own softmax:cudnn tda:own)
rc=0
for run in "${RUNS[@]}"; do
  kind=${run%%:*}
  impl=${run#*:}
  for profile in 0 1; do
    log=$WORK/train_${kind}_${impl}$([ "$profile" = 1 ] && echo _profile).log
    args=(bench train -c "configs/gpt2_162m/$kind.json"
          --set data.train=data/tinyshakespeare/tiny_shakespeare_train.bin
          --set data.val=data/tinyshakespeare/tiny_shakespeare_val.bin --set train.dtype=bf16
          --set train.device=cuda --set train.micro_batch=16 --set train.total_batch_tokens=16384
          --set dist.zero_stage=0 --set "attention.impl=$impl")
    if [ "$profile" = 1 ]; then args+=(--steps 3 --profile); else args+=(--steps "$STEPS"); fi
    echo "[bench_train] $kind, attention.impl $impl$([ "$profile" = 1 ] && echo ', profiled')"
    if build-cuda/tda "${args[@]}" >"$log" 2>&1; then
      grep '^{' "$log" >>"$WORK/tda_train.jsonl"
    else
      echo "[bench_train] failed: $kind $impl: $(grep -m1 -i 'error' "$log")"
      rc=1
      break  # the profiled run would fail the same way
    fi
  done
done
exit $rc
