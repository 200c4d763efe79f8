// tda bench train --config FILE [--steps N] [--set k=v]
// Prints one JSON line: ms/step, tokens/s, achieved GFLOP/s (FLOPs per token counted in
// docs/perf.md) and the GFLOP/s of a plain OpenBLAS SGEMM with the model's largest matmul
// shape (the LM head) on this machine, so the two can be compared.
#include <cblas.h>

#include <chrono>
#include <cxxopts.hpp>
#include <iostream>
#include <vector>

#include "cli/command.h"
#include "core/config.h"
#include "core/rng.h"
#include "train/trainer.h"

namespace tda {
namespace {

double sgemm_gflops(int M, int N, int K, int reps) {
  std::vector<float> a(size_t(M) * K), b(size_t(N) * K), c(size_t(M) * N);
  Rng rng(1);
  for (auto& x : a) x = rng.uniform();
  for (auto& x : b) x = rng.uniform();
  // Same transposition as the model's forward: C = A B^T.
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.f, a.data(), K, b.data(), K, 0.f,
              c.data(), N);
  auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.f, a.data(), K, b.data(), K,
                0.f, c.data(), N);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return 2.0 * M * N * K * reps / s / 1e9;
}

int bench_train(int argc, char** argv) {
  cxxopts::Options opts(argv[0], "Benchmark training steps");
  opts.add_options()("c,config", "JSON config", cxxopts::value<std::string>())(
      "steps", "timed steps", cxxopts::value<int>()->default_value("5"))(
      "set", "override a config key", cxxopts::value<std::vector<std::string>>())("h,help", "help");
  auto r = opts.parse(argc, argv);
  if (r.count("help") || !r.count("config")) {
    std::cout << opts.help() << "\n";
    return r.count("help") ? 0 : 2;
  }
  std::vector<std::string> sets;
  if (r.count("set")) sets = r["set"].as<std::vector<std::string>>();
  Config cfg = load_config(r["config"].as<std::string>(), sets);
  TrainOptions to;
  to.out_dir = "/tmp/tda_bench_run";
  Trainer trainer(cfg, to);
  trainer.train_step();  // warm-up: first-touch of buffers, BLAS thread start
  const int steps = r["steps"].as<int>();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) trainer.train_step();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto& m = cfg.model;
  double tokens = double(cfg.train.total_batch_tokens) * steps;
  double gflops = trainer.model().train_flops_per_token(m.seq_len) * tokens / s / 1e9;
  int N = cfg.train.micro_batch * m.seq_len;
  double blas = sgemm_gflops(N, m.vocab_size, m.d_model, 3);
  json out = {{"bench", "train"},
              {"attention", cfg.attention.kind},
              {"params", trainer.model().num_params()},
              {"B", cfg.train.micro_batch},
              {"T", m.seq_len},
              {"grad_accum", trainer.grad_accum_steps()},
              {"ms_per_step", 1000.0 * s / steps},
              {"tokens_per_s", tokens / s},
              {"gflops", gflops},
              {"sgemm_gflops", blas},
              {"sgemm_shape", {N, m.vocab_size, m.d_model}},
              {"ratio", gflops / blas}};
  std::cout << out.dump() << std::endl;
  return 0;
}

int cmd_bench(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: tda bench train --config FILE [--steps N]\n";
    return 2;
  }
  std::string what = argv[1];
  std::string prog = std::string(argv[0]) + " " + what;
  argv[1] = const_cast<char*>(prog.c_str());
  if (what == "train") return bench_train(argc - 1, argv + 1);
  std::cerr << "tda bench: unknown benchmark '" << what << "' (known: train)\n";
  return 2;
}

RegisterCommand reg("bench", "benchmarks (train)", cmd_bench);

}  // namespace
}  // namespace tda
