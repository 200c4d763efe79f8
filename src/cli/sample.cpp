// tda sample --checkpoint DIR --prompt "..." [--tokens N] [--temperature T] [--top-k K] [--greedy]
//            [--max-context N] [--device cpu|cuda] [--dtype fp32|bf16]
//            (KV-cache decoding; model/generator.h)
#include <cxxopts.hpp>
#include <iostream>

#include "cli/command.h"
#include "cli/device_flags.h"
#include "core/error.h"
#include "eval/loaded_model.h"
#include "model/generator.h"
#include "model/rope.h"
#include "train/sampler.h"

namespace tda {
namespace {

int cmd_sample(int argc, char** argv) {
  cxxopts::Options opts(argv[0], "Generate text from a checkpoint");
  opts.add_options()("checkpoint", "checkpoint directory", cxxopts::value<std::string>())(
      "prompt", "prompt text", cxxopts::value<std::string>()->default_value("\n"))(
      "tokens", "new tokens", cxxopts::value<int>()->default_value("100"))(
      "temperature", "sampling temperature (0 = greedy)",
      cxxopts::value<double>()->default_value("1.0"))(
      "top-k", "sample from the k most likely tokens (0 = all)",
      cxxopts::value<int>()->default_value("40"))("greedy", "greedy decoding")(
      "seed", "RNG seed", cxxopts::value<uint64_t>()->default_value("1337"))(
      "max-context", "KV-cache length in tokens, may exceed the trained length (0 = model's)",
      cxxopts::value<int>()->default_value("0"))("h,help", "show help");
  add_device_flags(opts);
  auto r = opts.parse(argc, argv);
  if (r.count("help") || !r.count("checkpoint")) {
    std::cout << opts.help() << "\n";
    return r.count("help") ? 0 : 2;
  }
  // Checked before the model loads: a negative value would otherwise be read as another mode
  // (no tokens, greedy, the whole vocabulary, the model's context).
  for (const char* flag : {"tokens", "top-k", "max-context"})
    TDA_CHECK(r[flag].as<int>() >= 0, std::string("sample: --") + flag + " must be >= 0, got " +
                                          std::to_string(r[flag].as<int>()));
  TDA_CHECK(r["temperature"].as<double>() >= 0,
            "sample: --temperature must be >= 0 (0: greedy), got " +
                std::to_string(r["temperature"].as<double>()));
  // sets dex's step
  LoadedModel lm = load_model_for_eval(r["checkpoint"].as<std::string>(), device_flags(r));
  SampleOptions so;
  so.max_new_tokens = r["tokens"].as<int>();
  so.temperature = r.count("greedy") ? 0.0 : r["temperature"].as<double>();
  so.top_k = r["top-k"].as<int>();
  so.seed = r["seed"].as<uint64_t>();
  so.max_context = r["max-context"].as<int>();
  require_memory(
      lm.model->ops(), Generator::memory_need(*lm.model, so.max_context),
      "sample: --max-context " +
          std::to_string(so.max_context > 0 ? so.max_context : rope_trained_context(lm.cfg.model)));
  std::cout << sample_text(*lm.model, r["prompt"].as<std::string>(), so) << std::endl;
  return 0;
}

RegisterCommand reg("sample", "generate text from a checkpoint", cmd_sample);

}  // namespace
}  // namespace tda
