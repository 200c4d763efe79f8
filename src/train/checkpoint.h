// Checkpoints: one directory per step, `<run>/checkpoints/step_NNNNNNNN/` holding
//   model.safetensors      fp32 parameters, tensor names as in the HF export
//   optimizer.safetensors  AdamW moments, "<param>.exp_avg" / "<param>.exp_avg_sq"
//   state.json             step, resolved config, loader position, metrics tail
// Written into a hidden temp directory, every file fsynced, then renamed into place; state.json
// is written last, so a directory without it is incomplete and never picked for resume.
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

// m, v: host copies of the AdamW moments (model.flat_size() floats each, saved per tensor: the
// alignment gaps are not in the files); the parameters are downloaded from the model's backend.
void save_checkpoint(const std::string& dir, const GPT2& model, const float* m, const float* v,
                     const TrainState& st);
// Loads parameters into `model` (names and shapes must match; uploaded to its backend) and, if
// m/v (host, flat_size() floats each; gaps left as they are) are non-null, the optimizer
// moments. Returns the saved state.
TrainState load_checkpoint(const std::string& dir, GPT2& model, float* m, float* v);
// train.init_from: loads only the parameters of `path` (a checkpoint directory, or a run
// directory whose newest checkpoint is taken) into `model`. Strict: the file must hold exactly
// the model's tensors with the same shapes; the first difference is a one-line error naming the
// tensor. Returns the checkpoint directory used.
std::string load_weights_strict(const std::string& path, GPT2& model);
// Reads only state.json (e.g. to rebuild the model config from a checkpoint).
TrainState read_checkpoint_state(const std::string& dir);
// Newest complete checkpoint under run_dir/checkpoints, or "" if none.
std::string latest_checkpoint(const std::string& run_dir);
std::string checkpoint_dir_name(int step);
// Removes all but the newest `keep` complete checkpoints (keep <= 0: keep all).
void prune_checkpoints(const std::string& run_dir, int keep);

}  // namespace tda
