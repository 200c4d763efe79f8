#!/usr/bin/env bash
# The GPU kit's Table 5 stage (scripts/gpu/check.sh, docs/gpu.md): the paper's kinds (TRA, TDA,
# softmax on our kernels and on cuDNN) forward + backward at its lengths, on random q, k and on a
# trained model's q, k, v; scripts/gpu/report.py sets them beside SDPA flash as Table 5.
#   random:  tda bench attention --mode time at the lengths the tda-attention stage left out
#   trained: each kind's tiny config (configs/tiny/KIND.json at context 1024) trained here for
#            STEPS steps on tinyshakespeare, then tda bench attention --checkpoint on the
#            training shard (305k tokens; the validation shard's 32k would repeat inside a 64k
#            window): bench_attention_checkpoint.cpp's windows of its 2 heads make the random
#            problem's 16 heads x 16k tokens
# Lines go to WORK/tda_attention.jsonl. Usage: table5.sh WORK DONE_LENGTHS LENGTHS STEPS
set -uo pipefail
WORK=$1 DONE=",$2," LENGTHS=$3 STEPS=$4
TDA=build-cuda/tda
rc=0
extra=""
for T in ${LENGTHS//,/ }; do
  case "$DONE" in *",$T,"*) ;; *) extra="$extra${extra:+,}$T" ;; esac
done
bench() { "$TDA" bench attention --device cuda --mode time "$@" >>"$WORK/tda_attention.jsonl"; }
if [ -n "$extra" ]; then
  for k in tra tda softmax; do bench --kind "$k" --T "$extra" || { echo "failed: $k"; rc=1; }; done
  bench --impl cudnn --kind softmax --T "$extra" || { echo "failed: softmax (cudnn)"; rc=1; }
fi
for k in tra tda softmax; do
  run="$WORK/table5/$k"
  "$TDA" train -c "configs/tiny/$k.json" -o "$run" --device cuda --steps "$STEPS" \
    --set model.seq_len=1024 --set train.micro_batch=1 --set train.val_every=0 \
    >"$WORK/logs/table5-train-$k.log" 2>&1 || { echo "failed: training $k"; rc=1; continue; }
  ckpt=$(ls -d "$run"/checkpoints/*/ 2>/dev/null | sort | tail -1)
  [ -n "$ckpt" ] || { echo "failed: no checkpoint of $k in $run"; rc=1; continue; }
  "$TDA" bench attention --device cuda --checkpoint "$ckpt" --T "$LENGTHS" \
    --tokens-file data/tinyshakespeare/tiny_shakespeare_train.bin \
    >>"$WORK/tda_attention.jsonl" || { echo "failed: $k (trained)"; rc=1; }
done
exit $rc
