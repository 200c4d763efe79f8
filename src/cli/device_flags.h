// --device / --dtype of the commands that run a model from a checkpoint (eval mc, passkey,
// longctx, sample, diag). The backend comes from make_ops(device) inside load_model_for_eval,
// so no command includes a backend header.
#pragma once
#include <cxxopts.hpp>
#include <string>

#include "core/error.h"
#include "eval/loaded_model.h"

namespace tda {

inline void add_device_flags(cxxopts::Options& opts) {
  opts.add_options()("device", "backend the model runs on: cpu or cuda",
                     cxxopts::value<std::string>()->default_value("cpu"))(
      "dtype", "fp32, or bf16 GEMM inputs over the fp32 weights (needs --device cuda)",
      cxxopts::value<std::string>()->default_value("fp32"));
}

inline EvalDevice device_flags(const cxxopts::ParseResult& r) {
  EvalDevice d{r["device"].as<std::string>(), r["dtype"].as<std::string>()};
  TDA_CHECK(d.dtype == "fp32" || d.dtype == "bf16",
            "--dtype \"" + d.dtype + "\": must be fp32 or bf16");
  return d;
}

}  // namespace tda
