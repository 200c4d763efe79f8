// tda eval val --checkpoint DIR [--data GLOB] [--sequences N] [--batch B] [--out FILE]
//              [--device cpu|cuda] [--dtype fp32|bf16]
// Validation loss of a checkpoint (src/eval/val_loss.h): the mean next-token loss over the first
// N windows of seq_len + 1 tokens of the validation shards (default: the checkpoint's data.val,
// every whole batch of it), read in order like the trainer's validation. JSON on stdout and in
// --out.
#include <cxxopts.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/device_flags.h"
#include "cli/eval_command.h"
#include "core/error.h"
#include "eval/loaded_model.h"
#include "eval/val_loss.h"

namespace tda {
namespace {

int cmd_eval_val(int argc, char** argv) {
  cxxopts::Options opts(argv[0], "Validation loss of a checkpoint on token shards");
  opts.add_options()("checkpoint", "checkpoint directory", cxxopts::value<std::string>())(
      "data", "token shards, a glob (default: the checkpoint's data.val)",
      cxxopts::value<std::string>()->default_value(""))(
      "sequences", "windows of seq_len+1 tokens to score (0 = every whole batch of the data)",
      cxxopts::value<long>()->default_value("0"))(
      "batch", "windows per forward pass (default: the checkpoint's train.micro_batch)",
      cxxopts::value<int>()->default_value("0"))("out", "also write the JSON result here",
                                                 cxxopts::value<std::string>()->default_value(""))(
      "h,help", "show help");
  add_device_flags(opts);
  auto r = opts.parse(argc, argv);
  if (r.count("help") || !r.count("checkpoint")) {
    std::cout << opts.help() << "\n";
    return r.count("help") ? 0 : 2;
  }
  const std::string ckpt = r["checkpoint"].as<std::string>();
  const EvalDevice dev = device_flags(r);
  LoadedModel lm = load_model_for_eval(ckpt, dev);
  std::string data = r["data"].as<std::string>();
  if (data.empty()) data = lm.cfg.data.val;
  const int B = r["batch"].as<int>() > 0 ? r["batch"].as<int>() : lm.cfg.train.micro_batch;
  TDA_CHECK(r["sequences"].as<long>() >= 0, "eval val: --sequences must be >= 0");
  require_memory(lm.model->ops(), lm.model->batch_memory(B, lm.cfg.model.seq_len),
                 "eval val: --batch " + std::to_string(B));
  const ValLossResult v = validation_loss(*lm.model, data, B, r["sequences"].as<long>());
  const nlohmann::json j = {{"val_loss", v.loss}, {"sequences", v.sequences},
                            {"tokens", v.tokens}, {"available_sequences", v.available},
                            {"batch", B},         {"data", data}};
  emit_eval_result(j, ckpt, lm, dev, r["out"].as<std::string>(), "eval val");
  return 0;
}

RegisterEvalCommand reg_val("val", "validation loss on token shards (the trainer's data.val)",
                            cmd_eval_val);

}  // namespace
}  // namespace tda
