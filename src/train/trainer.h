// The training loop: gradient accumulation to a token budget per step, the optimizer (AdamW with
// decoupled weight decay on matrices only, train/optimizer.h), warmup + cosine LR, global-norm
// clipping, validation every N steps, metrics.jsonl, checkpoints, SIGINT/SIGTERM/SIGHUP
// handling, NaN/Inf detection. One trainer per run directory: rank 0 locks it (run_dir.h).
//
// Data parallel: every rank holds the full model and runs the same step on its slice of the
// batch; gradients are summed once per step after accumulation. Where the optimizer's state
// lives (replicated, or sharded with dist.zero_stage=1: ZeRO-1) is optimizer.h's
// DataParallelOptimizer. Checkpoints always hold the full optimizer state, so a run can resume
// on any number of ranks.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "backend/profile_ops.h"
#include "core/config.h"
#include "data/loader.h"
#include "distributed/communicator.h"
#include "model/gpt2.h"
#include "train/checkpoint.h"
#include "train/loop_eval.h"
#include "train/optimizer.h"
#include "train/run_dir.h"
#include "train/step_report.h"
#include "train/tensorboard.h"

namespace tda {

struct TrainOptions {
  std::string out_dir = "runs/default";
  std::string resume;  // "" (fresh), "auto" (newest in out_dir, if any), or a directory
  // A fresh run (no resume) refuses an out_dir that already holds a run, unless this is set:
  // then that run's files (train/run_dir.h: run_files) are deleted first.
  bool overwrite = false;
  int max_steps_override = -1;  // stop after this many steps (tests: N then resume to 2N)
  // false: skip the random init of the weights (tda bench dryrun: in the emulator's dry run
  // nothing reads them, and drawing 162M normals on the host is most of its time).
  bool init_weights = true;
  Communicator* comm = nullptr;  // null: single process
  // Rank 0 holds out_dir's lock (train/run_dir.h) for the trainer's life. false: a launcher that
  // started this process as a worker holds it for the whole job.
  bool lock_run_dir = true;
  // Wrap the backend in ProfileOps and name the step's phases (tda bench train --profile).
  bool profile = false;
  // --strict: a vendor attention (attention.impl) that fails its self-check against our kernels
  // stops the run instead of leaving those calls to our kernels.
  bool strict = false;
};

// Micro-batches per optimizer step: total_batch_tokens / (micro_batch * seq_len * ranks);
// throws naming the keys (and a micro_batch that works) when it does not divide.
int grad_accum_steps(const Config& cfg, int ranks);

class Trainer {
 public:
  Trainer(const Config& cfg, TrainOptions opt);
  ~Trainer();
  // Trains until max_steps (or an interrupt). Returns the process exit code.
  int run();
  // One optimizer step (all micro-batches); public for the benchmark.
  StepMetrics train_step();
  double evaluate();  // mean validation loss over val_batches
  GPT2& model() { return *model_; }
  int grad_accum_steps() const { return accum_; }
  // The start-up line of attention.impl: which code computes the attention
  // (Ops::set_attention_impl).
  const std::string& attention_impl_line() const { return attention_impl_line_; }
  int step() const { return state_.step; }
  const std::vector<double>& val_history() const { return val_history_; }
  ProfileOps* profile() { return profile_; }  // null unless TrainOptions::profile

 private:
  // The step and the validation pass check for a stop signal before every micro-batch when
  // `interruptible`: a stop drops the unfinished step (or validation) and returns false. The
  // parameters, moments and state_ then still describe the last finished step.
  bool run_step(StepMetrics* out, bool interruptible);
  int run_loop(int last);  // run() under its signal handlers
  bool run_evaluate(double* out, bool interruptible);
  bool stop_requested();   // agreed by all ranks (a collective when there are several)
  void prepare_run_dir();  // rank 0: refuse/overwrite an existing run, repair checkpoints/
  // Rank 0, --resume auto found no intact checkpoint: refuses when the run had some, else says
  // that the run starts at step 0. Returns whether an earlier run's records are superseded.
  bool start_without_checkpoint();
  // Rank 0: the checks that read every shard (data/shard.h), before anything is written.
  void check_data();
  // Rank 0, a fresh start that failed before its first step: removes the files it wrote, so that
  // the corrected command is not refused as "already holds a run".
  void discard_failed_start();
  void save(bool final_save);
  // A record of metrics.jsonl (rank 0), mirrored to the TensorBoard events when they are on.
  void log_json(const json& j);
  // Rank 0: the events file of this start (log.tensorboard), its first events: the start mark,
  // the kept records of the step resumed from, the config as text.
  void open_tensorboard();
  void maybe_sample();
  // train.eval_every: the zero-shot task on every rank's share, one "eval" record (rank 0).
  void run_loop_eval();
  // Rank 0 read a checkpoint into the model and the optimizer state (host, P floats each):
  // every rank gets its share.
  void share_resumed(std::vector<std::vector<float>>& state);

  void phase(const char* name) {
    if (profile_) profile_->set_phase(name);
  }

  Config cfg_;
  TrainOptions opt_;
  FileLock lock_;  // out_dir's, on rank 0 (released last: members die in reverse order)
  std::unique_ptr<Ops> backend_;  // the real backend when ops_ is a ProfileOps around it
  std::unique_ptr<Ops> ops_;
  ProfileOps* profile_ = nullptr;
  std::unique_ptr<Communicator> own_comm_;
  Communicator* comm_;
  std::unique_ptr<GPT2> model_;
  std::unique_ptr<BatchSource> train_loader_, val_loader_;  // shards or a synthetic task
  // AdamW, its state in the backend's memory, replicated or sharded (ZeRO-1): optimizer.h.
  std::unique_ptr<DataParallelOptimizer> optimizer_;
  std::vector<int32_t> inputs_, targets_;
  TrainState state_;
  int accum_ = 1;
  std::string attention_impl_line_;
  int saved_step_ = -1;       // step of the last checkpoint this process wrote
  bool fresh_files_ = false;  // rank 0 wrote config.json and a new metrics.jsonl (fresh start)
  // The optimizer zeroed the gradients in its pass (adamw_clip_zero): the next step needs no
  // zeroing pass of its own.
  bool grads_zero_ = false;
  std::vector<double> val_history_;
  std::unique_ptr<LoopEval> loop_eval_;  // null unless train.eval_every > 0
  FILE* metrics_ = nullptr;
  std::unique_ptr<TensorBoardWriter> tb_;  // rank 0, log.tensorboard
  std::unique_ptr<StepReport> step_report_;
};

}  // namespace tda
