// tda train --config FILE [--out DIR] [--resume auto|DIR | --overwrite] [--set key=value ...]
//           [--procs N] [--gpus N] [--strict]
//
// Data parallel: `--procs N` starts N CPU ranks itself (under the system mpirun), `--gpus N`
// forks N NCCL workers itself (no mpirun; distributed/launch.h); a process started by a user-typed
// mpirun or srun finds its rank in the environment. docs/distributed.md has the launch recipes.
#include <algorithm>
#include <cstdio>
#include <cxxopts.hpp>
#include <iostream>

#include "attention/registry.h"
#include "cli/command.h"
#include "cli/config_flags.h"
#include "core/config.h"
#include "core/error.h"
#include "distributed/communicator.h"
#include "distributed/launch.h"
#include "train/checkpoint.h"
#include "train/run_dir.h"
#include "train/trainer.h"

namespace tda {
namespace {

// argv after `tda train` without --procs/--gpus N (the workers must not launch again).
std::vector<std::string> worker_args(int argc, char** argv) {
  std::vector<std::string> r;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--procs" || a == "--gpus") {
      ++i;
      continue;
    }
    if (a.rfind("--procs=", 0) == 0 || a.rfind("--gpus=", 0) == 0) continue;
    r.push_back(a);
  }
  return r;
}

// Runs the trainer on this process's rank. A failure on one rank of several ends the whole job
// (the others would wait for it forever in the next collective). The rank comes from the
// launcher's environment, so that a failure while joining the job (no GPU, no driver, NCCL
// init) is recorded for the launcher too.
int run_rank(const Config& cfg, TrainOptions to) {
  const LaunchEnv env = launch_env();
  WorkerRecord record(env.rank);
  DistOptions dist;
  dist.timeout_s = cfg.dist.timeout_s;
  // Our own launcher holds the run directory's lock for the whole job (cmd_train).
  to.lock_run_dir = !WorkerRecord::active();
  std::unique_ptr<Communicator> comm;
  try {
    comm = make_communicator(cfg.train.device, dist);
    to.comm = comm.get();
    Trainer trainer(cfg, to);
    int code = trainer.run();
    record.finish(code);
    return code;
  } catch (const std::exception& e) {
    record.finish(1, e.what());
    if (env.world == 1) throw;
    // One line per failure: under our own launcher the launcher prints it; under a user's
    // mpirun, each failing rank says who it is (abort_job may end the process: print first).
    if (!WorkerRecord::active()) std::fprintf(stderr, "error: rank %d: %s\n", env.rank, e.what());
    std::fflush(stderr);
    if (comm) comm->abort_job(1);
    return 1;
  }
}

int cmd_train(int argc, char** argv) {
  cxxopts::Options opts(argv[0], "Train GPT-2 with a pluggable attention mechanism");
  opts.add_options()("c,config", "JSON config file", cxxopts::value<std::string>())(
      "o,out", "run directory (config, metrics, checkpoints; default runs/<config folder>/<name>)",
      cxxopts::value<std::string>())(
      "resume", "'auto' (newest checkpoint in --out) or a checkpoint directory",
      cxxopts::value<std::string>()->default_value(""))(
      "overwrite",
      "replace the run already in --out (its metrics, config, TensorBoard events and "
      "checkpoints)")(
      "strict",
      "stop when a vendor attention (attention.impl) fails its start-up self-check, instead of "
      "running those calls on our kernels")(
      "set", "override a config key: --set optim.lr=3e-4 (repeatable)",
      cxxopts::value<std::vector<std::string>>())(
      "steps", "stop after this many steps (default: train.max_steps)",
      cxxopts::value<int>()->default_value("-1"))(
      "device",
      "cpu or cuda (same as --set train.device=...; this build's cuda may be the "
      "CPU emulator, docs/cuda.md)",
      cxxopts::value<std::string>())(
      "dtype", "fp32 or bf16 (same as --set train.dtype=...; bf16 needs --device cuda)",
      cxxopts::value<std::string>())(
      "tuning",
      "our CUDA attention kernels' shapes from this table of tda tune (same as --set "
      "attention.tuning=...)",
      cxxopts::value<std::string>())(
      "procs", "data-parallel CPU ranks, started by tda under the system mpirun",
      cxxopts::value<int>()->default_value("1"))(
      "gpus", "data-parallel GPU ranks (NCCL), one worker process per GPU started by tda",
      cxxopts::value<int>()->default_value("0"))("h,help", "show help");
  cxxopts::ParseResult r;
  int code = 0;
  if (!parse_config_command(opts, argc, argv, &r, &code)) return code;
  std::vector<std::string> sets = set_flags(r);
  if (r.count("device")) sets.push_back("train.device=" + r["device"].as<std::string>());
  if (r.count("dtype")) sets.push_back("train.dtype=" + r["dtype"].as<std::string>());
  if (r.count("tuning")) sets.push_back("attention.tuning=" + r["tuning"].as<std::string>());
  Config cfg = load_config(r["config"].as<std::string>(), sets);
  check_attention_sets(cfg, sets);
  TrainOptions to;
  to.out_dir =
      r.count("out") ? r["out"].as<std::string>() : default_run_dir(r["config"].as<std::string>());
  to.resume = r["resume"].as<std::string>();
  to.overwrite = r.count("overwrite") > 0;
  to.strict = r.count("strict") > 0;
  to.max_steps_override = r["steps"].as<int>();
  // -1 (the default) stands for train.max_steps: a negative count given by hand is a mistake,
  // not a request to train the whole schedule.
  TDA_CHECK(!r.count("steps") || to.max_steps_override >= 0,
            "--steps must be >= 0, got " + std::to_string(to.max_steps_override));

  const int procs = r["procs"].as<int>(), gpus = r["gpus"].as<int>();
  TDA_CHECK(procs >= 1, "--procs must be >= 1, got " + std::to_string(procs));
  TDA_CHECK(gpus >= 0, "--gpus must be >= 0 (0: no NCCL ranks), got " + std::to_string(gpus));
  TDA_CHECK(procs == 1 || gpus == 0, "--procs (CPU ranks) and --gpus (GPU ranks): pick one");
  if (procs > 1 || gpus > 1) {
    TDA_CHECK(!launch_env().launched,
              std::string(gpus > 1 ? "--gpus" : "--procs") +
                  " starts its own workers: drop it under mpirun/srun (each process they start "
                  "is already one rank)");
    // Checked here, before any worker starts: the launcher's report is for runs that started.
    grad_accum_steps(cfg, std::max(procs, gpus));
    // Before the workers exist, and before .workers is written: a second job on this directory
    // is refused here. Inherited by the workers started below, so it outlives a killed launcher
    // for as long as any of them still writes.
    const FileLock lock = lock_run_dir(to.out_dir, /*inherit=*/true);
    LaunchOptions lo;
    lo.procs = std::max(procs, gpus);
    lo.worker_dir = to.out_dir + "/.workers";
    lo.args = worker_args(argc, argv);
    try {
      return gpus > 1 ? launch_gpu_workers(lo) : launch_workers(lo);
    } catch (const Error& e) {
      // Say what is on disk rather than promise it: a run that failed at start-up wrote nothing.
      const std::string ck = latest_checkpoint(to.out_dir);
      throw Error(std::string(e.what()) +
                  (ck.empty() ? "; no checkpoint was written"
                              : "; the newest checkpoint, " + ck + ", is intact (--resume auto)"));
    }
  }
  return run_rank(cfg, to);
}

RegisterCommand reg("train", "train a model from a JSON config", cmd_train);

}  // namespace
}  // namespace tda
