// tda train --config FILE [--out DIR] [--resume auto|DIR] [--set key=value ...]
#include <cxxopts.hpp>
#include <iostream>

#include "cli/command.h"
#include "core/config.h"
#include "train/trainer.h"

namespace tda {
namespace {

int cmd_train(int argc, char** argv) {
  cxxopts::Options opts(argv[0], "Train GPT-2 with a pluggable attention mechanism");
  opts.add_options()("c,config", "JSON config file", cxxopts::value<std::string>())(
      "o,out", "run directory (config, metrics, checkpoints)", cxxopts::value<std::string>())(
      "resume", "'auto' (newest checkpoint in --out) or a checkpoint directory",
      cxxopts::value<std::string>()->default_value(""))(
      "set", "override a config key: --set optim.lr=3e-4 (repeatable)",
      cxxopts::value<std::vector<std::string>>())(
      "steps", "stop after this many steps (default: train.max_steps)",
      cxxopts::value<int>()->default_value("-1"))("h,help", "show help");
  auto r = opts.parse(argc, argv);
  if (r.count("help") || !r.count("config")) {
    std::cout << opts.help() << "\n";
    return r.count("help") ? 0 : 2;
  }
  std::vector<std::string> sets;
  if (r.count("set")) sets = r["set"].as<std::vector<std::string>>();
  Config cfg = load_config(r["config"].as<std::string>(), sets);
  TrainOptions to;
  if (r.count("out")) {
    to.out_dir = r["out"].as<std::string>();
  } else {
    std::string c = r["config"].as<std::string>();
    auto slash = c.find_last_of('/');
    std::string base = c.substr(slash == std::string::npos ? 0 : slash + 1);
    to.out_dir = "runs/" + base.substr(0, base.rfind('.'));
  }
  to.resume = r["resume"].as<std::string>();
  to.max_steps_override = r["steps"].as<int>();
  Trainer trainer(cfg, to);
  return trainer.run();
}

RegisterCommand reg("train", "train a model from a JSON config", cmd_train);

}  // namespace
}  // namespace tda
