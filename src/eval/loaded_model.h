// A model rebuilt from a checkpoint directory for evaluation/export: the resolved config from
// state.json, the parameters from model.safetensors, and the optimizer step (the `dex`
// mechanism anneals its lambda with it, so inference must use the checkpoint's step).
//
// The model runs on the backend named by `device` (make_ops: "cpu", "cuda"), in `dtype` ("fp32",
// or "bf16" GEMM inputs where the backend has them), so evaluations run on the researcher's
// GPUs. `decorate`, when given, wraps the backend (diagnostics' ProbeOps) and the model is built
// on the wrapper.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "backend/ops.h"
#include "core/config.h"
#include "model/gpt2.h"

namespace tda {

struct EvalDevice {
  std::string device = "cpu";
  std::string dtype = "fp32";
};

struct LoadedModel {
  Config cfg;
  int step = 0;
  std::unique_ptr<Ops> backend;    // make_ops(device)
  std::unique_ptr<Ops> decorator;  // optional wrapper of *backend, the model's Ops when set
  std::unique_ptr<GPT2> model;
};

LoadedModel load_model_for_eval(
    const std::string& checkpoint_dir, const EvalDevice& dev = {},
    const std::function<std::unique_ptr<Ops>(Ops& backend)>& decorate = {});

}  // namespace tda
