// Checkpoints: one directory per step, `<run>/checkpoints/step_NNNNNNNN/` holding
//   model.safetensors      fp32 parameters, tensor names as in the HF export
//   optimizer.safetensors  the optimizer's state, "<param>.<state>" (AdamW: exp_avg, exp_avg_sq;
//                          train/optimizer.h)
//   state.json             step, resolved config, loader position, metrics tail
// Both safetensors files carry a CRC32C per tensor (core/safetensors.h), verified on load.
//
// Crash safety (docs/checkpoints.md): a checkpoint is written into a hidden `.step_N.tmp/`,
// every file fsynced, state.json last, then renamed into place; a directory is removed only
// after being renamed to a hidden `.step_N.trash/`. So at any kill point `step_N/` is either
// complete or absent, and cleanup_checkpoints() (run at start-up) finishes or removes whatever
// a killed writer or pruner left.
#pragma once
#include <string>
#include <vector>

#include "core/config.h"
#include "data/loader.h"
#include "model/gpt2.h"

namespace tda {

struct TrainState {
  int step = 0;  // number of optimizer steps completed
  LoaderPosition loader;
  double last_train_loss = 0, last_val_loss = -1;
  json config;
};

// One optimizer state buffer as checkpoints hold it: host memory, model.flat_size() floats,
// saved per tensor as "<param>.<name>" (the alignment gaps are not in the files).
struct StateBuffer {
  std::string name;
  float* data;
};

// The parameters are downloaded from the model's backend; `state` is the optimizer's (host
// copies). Re-saving an existing step replaces it atomically.
void save_checkpoint(const std::string& dir, const GPT2& model,
                     const std::vector<StateBuffer>& state, const TrainState& st);
// Loads parameters into `model` (exactly its tensors, same shapes, checksums verified; uploaded
// to its backend) and, unless `state` is empty, the optimizer's state into those buffers (the
// file must hold exactly those names; gaps left as they are). Returns the saved state. A
// damaged file throws CorruptFile, a mismatch Error.
TrainState load_checkpoint(const std::string& dir, GPT2& model,
                           const std::vector<StateBuffer>& state = {});
// train.init_from: loads only the parameters of `path` (a checkpoint directory, or a run
// directory whose newest checkpoint is taken) into `model`. Strict: the file must hold exactly
// the model's tensors with the same shapes; the first difference is a one-line error naming the
// tensor. Returns the checkpoint directory used.
std::string load_weights_strict(const std::string& path, GPT2& model);
// Reads only state.json (e.g. to rebuild the model config from a checkpoint).
TrainState read_checkpoint_state(const std::string& dir);
// Complete checkpoints under run_dir/checkpoints (step_NNNNNNNN with state.json), oldest first.
std::vector<std::string> complete_checkpoints(const std::string& run_dir);
// Newest complete checkpoint under run_dir/checkpoints, or "" if none.
std::string latest_checkpoint(const std::string& run_dir);
std::string checkpoint_dir_name(int step);
// Removes all but the newest `keep` complete checkpoints (keep <= 0: keep all), each renamed
// to a hidden trash name before it is deleted.
void prune_checkpoints(const std::string& run_dir, int keep);
// Start-up repair of run_dir/checkpoints after a kill: a complete `.step_N.tmp` whose step_N is
// missing (killed while replacing it) is renamed into place, other `.tmp` and all `.trash`
// directories are removed. A `step_N/` without state.json (an older tda pruned in place, or a
// file was deleted) is moved aside to `step_N.corrupt` (removed only when empty): its other files
// may pass their checksums. Returns one line per action, for the log.
std::vector<std::string> cleanup_checkpoints(const std::string& run_dir);

// Resume checks the checkpoint's saved config against this run's: every model.* and
// attention.* key that changes the math must be equal. Returns "" when compatible, else the
// differing keys with both values ("attention.kind: checkpoint \"ssmax\", this run \"softmax\"").
std::string model_config_differences(const json& saved, const json& current);

// What --resume found: the directory used ("" for a fresh start) and its state.
struct ResumeResult {
  std::string dir;
  TrainState state;
};
// Loads `resume` ("auto": the newest intact checkpoint of run_dir, or none; else a checkpoint
// directory) into model and `state` after checking model_config_differences against `config`.
// With "auto", a checkpoint that fails its integrity check or misses a file is skipped with an
// error line, moved aside to `<name>.corrupt` (kept, never deleted, no longer pruned or picked),
// and the previous one is tried; if every checkpoint is corrupt that is an error. No checkpoint
// at all returns an empty dir: the caller decides whether that may start afresh (run_dir.h).
ResumeResult resume_checkpoint(const std::string& resume, const std::string& run_dir,
                               const json& config, GPT2& model,
                               const std::vector<StateBuffer>& state);

}  // namespace tda
