// tda sweep SPEC.json [--out DIR] [--gpus N] [--parallel K] [--device cpu|cuda] [--dtype D]
//           [--eval-data DIR] [--scrolls-data DIR] [--config FILE] [--set key=value ...]
//           [--only a,b] [--no-eval] [--dry-run] [--detach]
// tda sweep status <sweep dir | SPEC.json> [--out DIR]
// Trains and evaluates every run of a sweep spec into runs/<sweep>/<run>/ (docs/sweeps.md);
// `tda report runs/<sweep>` then writes the paper's tables and figures (docs/report.md).
#include <sys/stat.h>

#include <cxxopts.hpp>
#include <iostream>
#include <sstream>

#include "cli/command.h"
#include "cli/config_flags.h"
#include "core/error.h"
#include "sweep/runner.h"
#include "sweep/spec.h"
#include "sweep/watch.h"

namespace tda {
namespace {

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

int cmd_sweep_status(int argc, char** argv) {
  cxxopts::Options opts(argv[0], "The state of a sweep: its runs, and whether it is running");
  opts.positional_help("<sweep dir | SPEC.json>");
  opts.add_options()("target", "sweep directory, or the spec it was started from",
                     cxxopts::value<std::string>())(
      "out", "the sweep directory, when the spec's was moved by tda sweep --out",
      cxxopts::value<std::string>()->default_value(""))("h,help", "show help");
  opts.parse_positional({"target"});
  auto r = opts.parse(argc, argv);
  if (r.count("help") || !r.count("target")) {
    std::cout << opts.help() << "\n";
    return r.count("help") ? 0 : 2;
  }
  const std::string target = r["target"].as<std::string>();
  std::string dir = r["out"].as<std::string>();
  if (dir.empty()) dir = is_dir(target) ? target : "runs/" + load_sweep(target).name;
  std::cout << sweep_status_text(dir);
  return 0;
}

int cmd_sweep(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "status") {
    std::string name = std::string(argv[0]) + " status";
    std::vector<char*> args{name.data()};
    for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
    return cmd_sweep_status(int(args.size()), args.data());
  }
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
      "detach",
      "run in the background, detached from this terminal (output in <sweep dir>/sweep.out); "
      "`tda sweep status` follows it")(
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
  if (r.count("detach") && !o.dry_run) {
    // The spec and every run's config were checked above, so what fails here fails now, not
    // in a log nobody is reading.
    const std::string dir = o.out_dir.empty() ? "runs/" + sweep.name : o.out_dir;
    std::vector<std::string> args = {"sweep"};
    for (int i = 1; i < argc; ++i)
      if (std::string(argv[i]) != "--detach") args.push_back(argv[i]);
    const int pid = detach_sweep(dir, args);
    std::cout << "tda sweep: running detached as pid " << pid
              << "; it goes on when this terminal closes\n"
              << "  output:  " << dir << "/sweep.out (tail -f it)\n"
              << "  status:  tda sweep status " << dir << "\n"
              << "  stop:    kill " << pid
              << " (training runs checkpoint; the same command resumes)\n";
    return 0;
  }
  return run_sweep(sweep, o);
}

RegisterCommand reg("sweep", "train and evaluate every run of a sweep spec (docs/sweeps.md)",
                    cmd_sweep);

}  // namespace
}  // namespace tda
