#!/bin/bash
# Runs scripts/slurm/*.sbatch without Slurm, on the CPU, with the tiny model on byte tokens:
# SLURM_* variables set, a fake `srun` and `mpirun` that drop their options and exec the command,
# a fake `scontrol` that answers `show job` with $FAKE_JOB_STATE and records `requeue`.
#   tests/slurm/fake_slurm_cycle.sh TDA_BINARY WORKDIR
# Cases: the time-limit warning (TERM to the batch shell) then requeue then resume, for the
# one-node self-launch (2 stand-in GPUs) and srun; a preemption (Slurm signals every process,
# no forward, no requeue by the script); mpirun; a sweep as a job array then `tda sweep` seeing
# its runs trained. Prints "FAIL: ..." and exits 1 at the first failed check.
set -uo pipefail
tda=$1 work=$2
root="$(cd "$(dirname "$0")/../.." && pwd)"
slurm="$root/scripts/slurm"
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$work/bin"
cd "$work" || exit 1

# byte tokens of Tiny Shakespeare in llm.c shards (vocabulary 256: small checkpoints)
python3 - "$root/data/tinyshakespeare/input.txt" <<'PY' || fail "shards"
import struct, sys
b = open(sys.argv[1], "rb").read()
def shard(path, toks):
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(toks), *([0] * 253)))
        f.write(struct.pack(f"<{len(toks)}H", *toks))
shard("train.bin", list(b[:60000]))
shard("val.bin", list(b[60000:70000]))
PY
tiny=(--set model.vocab_size=256 --set model.real_vocab_size=256 --set data.train=train.bin
      --set data.val=val.bin --set train.val_every=1000 --set train.log_every=1)

cat >bin/srun <<'SH'
#!/bin/bash
echo "srun $*" >>"$FAKE_SLURM_LOG"
while [[ $# -gt 0 && $1 == -* ]]; do shift; done
export SLURM_STEP_NUM_TASKS=1 SLURM_PROCID=0 SLURM_LOCALID=0
exec "$@"
SH
cat >bin/mpirun <<'SH'
#!/bin/bash
echo "mpirun $*" >>"$FAKE_SLURM_LOG"
while [[ $# -gt 0 && $1 == -* ]]; do
  case $1 in --mca) shift 3 ;; -np|--map-by|--bind-to|-x) shift 2 ;; *) shift ;; esac
done
exec "$@"
SH
cat >bin/scontrol <<'SH'
#!/bin/bash
case "$1 $2" in
  "show job") echo "JobId=$3 JobName=tda JobState=${FAKE_JOB_STATE:-RUNNING} Reason=None" ;;
  "requeue "*) echo "requeue $2" >>"$FAKE_SLURM_LOG" ;;
  *) echo "scontrol: unexpected: $*" >&2; exit 1 ;;
esac
SH
chmod +x bin/*
export PATH="$work/bin:$PATH" TDA="$tda" TDA_ROOT="$root" FAKE_SLURM_LOG="$work/slurm.log"
export SLURM_SUBMIT_DIR="$work" SLURM_JOB_NUM_NODES=1 SLURM_NTASKS=1 SLURM_CPUS_PER_TASK=1
export OMP_NUM_THREADS=1
: >slurm.log

last_step() { grep '"type":"train"' "$1/metrics.jsonl" 2>/dev/null | tail -n1 |
  grep -o '"step":[0-9]*' | cut -d: -f2; }
wait_step() {  # run dir, step: waits (20 s at most) until the run has logged that step
  for _ in $(seq 2000); do
    [[ "$(last_step "$1")" -ge $2 ]] 2>/dev/null && return 0
    sleep 0.01
  done
  fail "$1 did not reach step $2"
}
# every train step 1..N exactly once, in order, and a resume record
check_continuous() {
  python3 - "$1/metrics.jsonl" "$2" <<'PY' || fail "$1: steps not continuous"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
steps = [r["step"] for r in recs if r["type"] == "train"]
assert steps == list(range(1, int(sys.argv[2]) + 1)), steps
assert any(r["type"] == "resume" for r in recs), "no resume record"
PY
}
cp "$root/configs/tiny/softmax.json" tiny.json
sed -i "s|\"base.json\"|\"$root/configs/tiny/base.json\"|" tiny.json
steps=12
sets=("${tiny[@]}" --set train.max_steps=$steps --set train.micro_batch=4)

# 1. The time-limit warning: TERM to the batch shell only; forwarded, checkpoint, requeue by the
# script, and the requeued job resumes to the end with every step once.
cycle() {  # run name, sbatch file, job id
  local name=$1 file=$2 job=$3
  SLURM_JOB_ID=$job bash "$slurm/$file" tiny.json "$name" "${sets[@]}" >"$name.1.log" 2>&1 &
  local shell=$!
  wait_step "$name" 3
  kill -TERM "$shell"
  wait "$shell" || fail "$name: the interrupted job exited $? ($(tail -n3 "$name.1.log"))"
  grep -q "requeue $job" slurm.log || fail "$name: no scontrol requeue $job"
  grep -q '"event":"interrupted"' "$name/metrics.jsonl" || fail "$name: no interrupted event"
  [[ "$(last_step "$name")" -lt $steps ]] || fail "$name: finished before the signal"
  SLURM_JOB_ID=$job SLURM_RESTART_COUNT=1 bash "$slurm/$file" tiny.json "$name" "${sets[@]}" \
    >"$name.2.log" 2>&1 || fail "$name: the requeued job failed ($(tail -n3 "$name.2.log"))"
  grep -q "resumed from" "$name.2.log" || fail "$name: the requeued job did not resume"
  check_continuous "$name" $steps
  echo "ok: $file: TERM at step $(grep -o '"event":"interrupted","step":[0-9]*' "$name/metrics.jsonl" | cut -d: -f3), requeued, resumed to step $steps"
}
GPUS=2 cycle node train_1node.sbatch 101
grep -q 'srun' slurm.log && fail "train_1node.sbatch used srun"
cycle srun train_srun.sbatch 102
grep -q "srun --mpi=pmix --kill-on-bad-exit=1 $tda train --config tiny.json --out srun --resume auto" slurm.log ||
  fail "train_srun.sbatch: srun command"

# 2. Preemption: Slurm signals every process of the job and requeues it itself; the script must
# not forward a second TERM (tda would exit without its checkpoint) nor requeue.
: >slurm.log
FAKE_JOB_STATE=PREEMPTED SLURM_JOB_ID=103 bash "$slurm/train_srun.sbatch" tiny.json pre \
  "${sets[@]}" >pre.log 2>&1 &
shell=$!
wait_step pre 3
pkill -TERM -P "$shell" -x tda  # the trainer (the fake srun exec'd it), then the shell
kill -TERM "$shell"
wait "$shell" || fail "preempted: exit $? ($(tail -n3 pre.log))"
grep -q requeue slurm.log && fail "preempted: the script requeued a job Slurm requeues"
grep -q "second interrupt" pre.log && fail "preempted: tda got a second TERM"
grep -q '"type":"checkpoint"' pre/metrics.jsonl || fail "preempted: no checkpoint"
echo "ok: preemption: one TERM, a checkpoint, no requeue by the script"

# 3. mpirun: the command line, and a run to the end
: >slurm.log
SLURM_JOB_ID=104 SLURM_NTASKS=16 SLURM_NTASKS_PER_NODE=8 bash "$slurm/train_mpirun.sbatch" \
  tiny.json mpi "${tiny[@]}" --set train.max_steps=2 >mpi.log 2>&1 || fail "mpirun: $(tail -n3 mpi.log)"
grep -q -- "mpirun -np 16 --map-by ppr:8:node --bind-to none --mca odls_base_sigkill_timeout 110 " slurm.log ||
  fail "mpirun: command line: $(cat slurm.log)"
[[ "$(last_step mpi)" == 2 ]] || fail "mpirun: run did not reach step 2"
echo "ok: train_mpirun.sbatch"

# 4. A sweep as a job array: task 1 starts from run 0 and is refused before it; each task trains
# its run into the directory the sweep uses, and `tda sweep` then sees both trained.
cat >sweep.json <<JSON
{"name": "arr", "config": "tiny.json",
 "set": {"model.vocab_size": 256, "model.real_vocab_size": 256, "data.train": "train.bin",
         "data.val": "val.bin", "train.max_steps": 2, "train.log_every": 1},
 "runs": [{"name": "a", "set": {"attention.kind": "softmax"}},
          {"name": "b", "init_from": "a", "group": "extension", "set": {"train.max_steps": 1}}]}
JSON
plan="$(bash "$slurm/sweep_array.sbatch" sweep.json --out runs/arr 2>&1)" || fail "array plan: $plan"
grep -q -- "--array=0 " <<<"$plan" && grep -q -- "--array=1 --dependency" <<<"$plan" ||
  fail "array plan: $plan"
SLURM_JOB_ID=105 SLURM_ARRAY_TASK_ID=1 bash "$slurm/sweep_array.sbatch" sweep.json --out runs/arr \
  >arr1.log 2>&1 && fail "array task 1 ran before run a trained"
grep -q "run b starts from run a, which has not finished training" arr1.log || fail "$(cat arr1.log)"
for t in 0 1; do
  SLURM_JOB_ID=10$((6 + t)) SLURM_ARRAY_TASK_ID=$t bash "$slurm/sweep_array.sbatch" sweep.json \
    --out runs/arr >arr$t.log 2>&1 || fail "array task $t: $(tail -n3 arr$t.log)"
done
"$tda" sweep sweep.json --out runs/arr --dry-run --no-eval >arr.plan 2>&1 || fail "$(cat arr.plan)"
[[ "$(grep -c ': trained$' arr.plan)" == 2 ]] || fail "tda sweep does not see the array's runs: $(cat arr.plan)"
echo "ok: sweep_array.sbatch: both runs trained where tda sweep finds them"
echo "PASS"
