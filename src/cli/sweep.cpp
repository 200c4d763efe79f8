// tda sweep SPEC.json [--out DIR] [--gpus N] [--parallel K] [--device cpu|cuda] [--dtype D]
//           [--eval-data DIR] [--scrolls-data DIR] [--config FILE] [--set key=value ...]
//           [--only a,b] [--no-eval] [--dry-run]
// Trains and evaluates every run of a sweep spec into runs/<sweep>/<run>/ (docs/sweeps.md);
// `tda report runs/<sweep>` then writes the paper's tables and figures (docs/report.md).
#include <cxxopts.hpp>
#include <iostream>
#include <sstream>

#include "cli/command.h"
#include "cli/config_flags.h"
#include "core/error.h"
#include "sweep/runner.h"
#include "sweep/spec.h"

namespace tda {
namespace {

int cmd_sweep(int argc, char** argv) {
  cxxopts::Options opts(argv[0], "Train and evaluate every run of a sweep spec (docs/sweeps.md)");
  opts.positional_help("SPEC.json");
  opts.add_options()("spec", "sweep spec (JSON)", cxxopts::value<std::string>())(
      "out", "sweep directory (default runs/<sweep name>)",
      cxxopts::value<std::string>()->default_value(""))(
      "gpus", "GPUs per training run (tda train --gpus N)",
      cxxopts::value<int>()->default_value("0"))(
      "parallel", "runs at once (CPU: the cores are divided among them; GPUs: --gpus each)",
      cxxopts::value<int>()->default_value("1"))(
      "device", "cpu or cuda, for training and the evaluations (default: the configs' / spec's)",
      cxxopts::value<std::string>()->default_value(""))(
      "dtype", "fp32 or bf16 for the evaluations (default: the spec's eval.dtype)",
      cxxopts::value<std::string>()->default_value(""))(
      "eval-data", "zero-shot data folder (the layout of scripts/prepare_evals.py)",
      cxxopts::value<std::string>()->default_value(""))(
      "scrolls-data", "SCROLLS folder: <task>/validation.jsonl (scripts/prepare_scrolls.py)",
      cxxopts::value<std::string>()->default_value(""))(
      "config", "replace the spec's default config (e.g. the 5-epoch schedule)",
      cxxopts::value<std::string>()->default_value(""))(
      "set", "override a config key in every run: --set train.max_steps=100 (repeatable)",
      cxxopts::value<std::vector<std::string>>())("only", "these runs only, comma-separated",
                                                  cxxopts::value<std::string>()->default_value(""))(
      "no-eval", "train only")("dry-run", "print the plan (commands, what is done) and exit")(
      "progress-every", "seconds between progress lines when stderr is not a terminal",
      cxxopts::value<double>()->default_value("60"))("h,help", "show help");
  opts.parse_positional({"spec"});
  auto r = opts.parse(argc, argv);
  if (r.count("help") || !r.count("spec")) {
    std::cout << opts.help() << "\n";
    return r.count("help") ? 0 : 2;
  }
  SweepOverrides ov;
  ov.config = r["config"].as<std::string>();
  ov.sets = set_flags(r);
  ov.eval_data = r["eval-data"].as<std::string>();
  ov.scrolls_data = r["scrolls-data"].as<std::string>();
  ov.device = r["device"].as<std::string>();
  ov.dtype = r["dtype"].as<std::string>();
  if (!ov.device.empty()) ov.sets.push_back("train.device=" + ov.device);
  const Sweep sweep = load_sweep(r["spec"].as<std::string>(), ov);

  SweepOptions o;
  o.out_dir = r["out"].as<std::string>();
  o.gpus = r["gpus"].as<int>();
  o.parallel = r["parallel"].as<int>();
  o.dry_run = r.count("dry-run") > 0;
  o.no_eval = r.count("no-eval") > 0;
  o.progress_every = r["progress-every"].as<double>();
  std::istringstream only(r["only"].as<std::string>());
  for (std::string n; std::getline(only, n, ',');)
    if (!n.empty()) o.only.push_back(n);
  return run_sweep(sweep, o);
}

RegisterCommand reg("sweep", "train and evaluate every run of a sweep spec (docs/sweeps.md)",
                    cmd_sweep);

}  // namespace
}  // namespace tda
