// Helpers for the data-parallel tests (test_dist.cpp: MPI ranks, test_dist_gpus.cpp: NCCL
// workers): run `tda train`, read what a run leaves on disk (metrics.jsonl losses,
// model.safetensors parameters) and compare runs.
//
// Tolerance: W ranks x micro-batch B sum the same per-sample gradients as 1 rank x W*B, but in a
// different fp32 order (per-rank GEMM sums, then a cross-rank sum), so results agree up to fp32
// reduction-order noise, which AdamW amplifies a little each step. Observed over 4 steps of the
// tiny model: losses within 3e-9 relative, parameters within 1.5e-7 (2 ranks) and 3.5e-6
// (3 ranks) relative L2. The tests allow 1e-4 for both: a real mismatch (a wrong shard, a
// missing rank, a stale moment) is orders of magnitude larger.
#pragma once
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/fs.h"
#include "core/safetensors.h"
#include "test_util.h"
#include "train/checkpoint.h"

namespace tda::dist_test {

constexpr double kLossRelTol = 1e-4;
constexpr double kParamRelTol = 1e-4;

inline bool have_mpirun() {
  return std::system("command -v mpirun >/dev/null 2>&1") == 0;
}

inline bool data_present() {
  return path_exists(source_dir() + "/data/tinyshakespeare/tiny_shakespeare_train.bin");
}

#define REQUIRE_MPI_AND_DATA()                                    \
  do {                                                            \
    if (!::tda::dist_test::have_mpirun())                         \
      TDA_SKIP("mpirun not found (apt-get install openmpi-bin)"); \
    REQUIRE(::tda::dist_test::data_present());                    \
  } while (0)

// `tda train` on the tiny softmax config: 512 tokens (4 sequences) per step, no validation.
inline std::string train_args(const std::string& out, int micro_batch, int zero,
                              int max_steps = 4) {
  return "train --config " + source_dir() + "/configs/tiny/softmax.json --out " + out +
         " --set train.micro_batch=" + std::to_string(micro_batch) +
         " --set train.total_batch_tokens=512 --set train.val_every=0 --set train.max_steps=" +
         std::to_string(max_steps) +
         " --set optim.warmup_steps=2 --set dist.zero_stage=" + std::to_string(zero);
}

inline void run_ok(const std::string& args) {
  std::string out;
  int rc = run_tda(args, &out);
  INFO(args << "\n" << out);
  REQUIRE(rc == 0);
}

inline std::vector<double> losses(const std::string& run_dir) {
  std::vector<double> r;
  std::ifstream f(run_dir + "/metrics.jsonl");
  std::string line;
  while (std::getline(f, line)) {
    json j = json::parse(line);
    if (j.value("type", "") == "train") r.push_back(j.at("loss").get<double>());
  }
  return r;
}

// All parameters of the newest checkpoint, tensor by tensor in name order.
inline std::vector<float> params(const std::string& run_dir) {
  std::string ck = latest_checkpoint(run_dir);
  REQUIRE(!ck.empty());
  SafetensorsFile f(ck + "/model.safetensors");
  std::vector<float> all;
  for (const auto& name : f.names()) {
    auto shape = f.shape(name);
    size_t n = 1;
    for (auto d : shape) n *= size_t(d);
    std::vector<float> t(n);
    f.read_into(name, shape, t.data());
    all.insert(all.end(), t.begin(), t.end());
  }
  return all;
}

inline void check_losses_close(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("step " << i + 1 << ": " << a[i] << " vs " << b[i]);
    CHECK(std::abs(a[i] - b[i]) <= kLossRelTol * std::abs(b[i]));
  }
}

// Parameters agree up to reduction-order noise: ||a - b|| / ||b|| (relative L2). A max-abs
// bound would be fragile: AdamW normalises each element's step, so an element whose gradient
// is ~0 can take a step of up to lr in either direction from noise alone.
inline void check_params_close(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double diff = 0, norm = 0, max_abs = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = double(a[i]) - double(b[i]);
    diff += d * d;
    norm += double(b[i]) * double(b[i]);
    max_abs = std::max(max_abs, std::abs(d));
  }
  const double rel = std::sqrt(diff / norm);
  std::fprintf(stderr, "params: relative L2 diff %.3g, max abs diff %.3g\n", rel, max_abs);
  INFO("relative L2 diff " << rel << ", max abs diff " << max_abs);
  CHECK(rel <= kParamRelTol);
}
// Starts `tda <args>` in the background with output to log; returns the launcher's pid.
inline pid_t spawn_tda(const std::string& args, const std::string& log) {
  pid_t pid = fork();
  if (pid == 0) {
    std::string cmd = "exec " + std::string(TDA_BINARY) + " " + args + " > " + log + " 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), (char*)nullptr);
    _exit(127);
  }
  return pid;
}

inline std::string slurp(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Polls until `path` is non-empty (and, if run_dir is given, run_dir has a checkpoint); false on
// a 30 s timeout or if the launcher already exited.
inline bool wait_for(pid_t launcher, const std::string& path, const std::string& run_dir = "") {
  int status = 0;
  for (int i = 0; i < 600; ++i) {
    if (waitpid(launcher, &status, WNOHANG) != 0) return false;
    if (!slurp(path).empty() && (run_dir.empty() || !latest_checkpoint(run_dir).empty()))
      return true;
    usleep(50000);
  }
  return false;
}
}  // namespace tda::dist_test
