# Sourced by the sbatch files in this folder (docs/slurm.md). Slurm runs a copy of the batch
# script from its spool directory, so the scripts find this file and the binary through the
# directory the job was submitted from: submit from the repository root, or set TDA_ROOT.

TDA_ROOT="${TDA_ROOT:-${SLURM_SUBMIT_DIR:-$PWD}}"
if [[ -z "${TDA:-}" ]]; then
  if [[ -x "$TDA_ROOT/build-cuda/tda" ]]; then TDA="$TDA_ROOT/build-cuda/tda"; else TDA=tda; fi
fi

slurm_log() { echo "[slurm $(date +%H:%M:%S)] $*" >&2; }

# Slurm's JobState for this job ("" outside Slurm or when scontrol fails).
slurm_job_state() {
  scontrol show job "${SLURM_JOB_ID:-}" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | head -n1 |
    cut -d= -f2
}

# Runs "$@" (a tda command) in the background and waits for it, so that the shell's traps run.
# On SIGTERM/SIGHUP to this batch shell (`#SBATCH --signal=B:TERM@120` before the time limit, or
# `scancel --batch --signal=TERM`): forwards one SIGTERM to the command (tda then finishes the
# micro-batch, checkpoints and exits 0), waits for it, and requeues the job with
# `scontrol requeue`; the requeued job runs this script again, whose `--resume auto` continues
# from that checkpoint. When Slurm itself is ending the job (scancel without --batch,
# preemption: JobState no longer RUNNING) it has signalled every process of the job already;
# a second SIGTERM would make tda exit at once without its checkpoint, so nothing is forwarded,
# and a preempted job is requeued by Slurm.
run_requeueable() {
  local signalled=0 forward=1 child
  on_stop() {
    signalled=1
    local state
    state="$(slurm_job_state)"
    if [[ -n "$state" && "$state" != RUNNING ]]; then
      forward=0
      slurm_log "signal received, JobState=$state: Slurm signals the job's processes itself"
    else
      slurm_log "signal received: tda checkpoints and stops (pid $child)"
      kill -TERM "$child" 2>/dev/null
    fi
    trap '' TERM HUP  # one forward only: a second interrupt would stop tda without a checkpoint
  }
  "$@" &
  child=$!
  trap on_stop TERM HUP
  local rc
  while :; do
    wait "$child"
    rc=$?
    kill -0 "$child" 2>/dev/null || break  # wait returned for a trapped signal: wait again
  done
  trap - TERM HUP
  if ((signalled)); then
    if ((forward)) && [[ -n "${SLURM_JOB_ID:-}" ]]; then
      slurm_log "tda exited with $rc; requeueing job $SLURM_JOB_ID (it resumes with --resume auto)"
      scontrol requeue "$SLURM_JOB_ID" || slurm_log "scontrol requeue $SLURM_JOB_ID failed"
    fi
    return "$rc"
  fi
  slurm_log "tda exited with $rc"
  return "$rc"
}
