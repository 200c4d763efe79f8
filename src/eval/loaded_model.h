// A model rebuilt from a checkpoint directory for evaluation/export: the resolved config from
// state.json, the parameters from model.safetensors, and the optimizer step (the `dex`
// mechanism anneals its lambda with it, so inference must use the checkpoint's step).
#pragma once
#include <memory>
#include <string>

#include "backend/cpu/cpu_ops.h"
#include "core/config.h"
#include "model/gpt2.h"

namespace tda {

struct LoadedModel {
  Config cfg;
  int step = 0;
  std::unique_ptr<CpuOps> ops;
  std::unique_ptr<GPT2> model;
};

LoadedModel load_model_for_eval(const std::string& checkpoint_dir);

}  // namespace tda
