// tda bench train --config FILE [--steps N] [--set k=v]
// Prints one JSON line: ms/step, tokens/s, achieved GFLOP/s (FLOPs per token counted in
// docs/perf.md) and, on the CPU, the GFLOP/s of the backend's own fp32 matmul at the model's
// largest shape (the LM head) on this machine, so the two can be compared. Steps are timed on
// the backend's device (backend/device.h: CUDA events on a GPU) and on a GPU the device memory
// the run holds is reported.
#include <algorithm>
#include <cstdlib>
#include <cxxopts.hpp>
#include <iostream>
#include <memory>
#include <vector>

#include "attention/common.h"
#include "attention/registry.h"
#include "attention/variant.h"
#include "backend/attention_tile_counts.h"
#include "backend/attention_tuning.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/device.h"
#include "backend/device_array.h"
#include "backend/make_ops.h"
#include "cli/bench_attention.h"
#include "cli/bench_gpu.h"
#include "cli/bench_profile.h"
#include "cli/command.h"
#include "cli/config_flags.h"
#include "core/config.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/rng.h"
#include "train/trainer.h"

namespace tda {
int bench_checkpoint(int argc, char** argv);  // bench_checkpoint.cpp
int bench_dryrun(int argc, char** argv);      // bench_dryrun.cpp

namespace {

// The backend's matmul_forward (y = x W^T, the model's forward transposition) of M x N x K,
// best of `reps` after one untimed call: the rate the step's GEMMs could reach at best.
double matmul_gflops(Ops& ops, int M, int N, int K, int reps) {
  std::vector<float> a(size_t(M) * K), b(size_t(N) * K);
  Rng rng(1);
  for (auto& x : a) x = rng.uniform();
  for (auto& x : b) x = rng.uniform();
  DeviceArray<float> x(ops, a.size(), "bench matmul x"), w(ops, b.size(), "bench matmul W"),
      y(ops, size_t(M) * N, "bench matmul y");
  x.upload(a.data(), a.size());
  w.upload(b.data(), b.size());
  ops.matmul_forward(y.data(), x.data(), w.data(), M, K, N);
  std::unique_ptr<DeviceTimer> t = ops.device().timer();
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    t->start();
    ops.matmul_forward(y.data(), x.data(), w.data(), M, K, N);
    t->stop();
    const double ms = t->ms();
    if (best == 0 || ms < best) best = ms;
  }
  return 2.0 * M * N * K / (best / 1000.0) / 1e9;
}

int bench_train(int argc, char** argv) {
  cxxopts::Options opts(argv[0], "Benchmark training steps");
  opts.add_options()("c,config", "JSON config", cxxopts::value<std::string>())(
      "steps", "timed steps", cxxopts::value<int>()->default_value("5"))(
      "set", "override a config key", cxxopts::value<std::vector<std::string>>())(
      "profile", "time every op by phase and print the table after the JSON line")("h,help",
                                                                                   "help");
  cxxopts::ParseResult r;
  int code = 0;
  if (!parse_config_command(opts, argc, argv, &r, &code)) return code;
  Config cfg = load_config(r["config"].as<std::string>(), set_flags(r));
  check_attention_sets(cfg, set_flags(r));
  // The backend, before the run allocates anything (the CUDA backend's start-up line, or one
  // line saying why there is no usable GPU, comes from make_ops): its device times the steps,
  // and the CPU's yardstick runs on it, outside the trainer's profiler.
  std::unique_ptr<Ops> backend = make_ops(cfg.train.device);
  Device& device = backend->device();
  const size_t mem0 = device.memory_used();
  TrainOptions to;
  // A scratch run directory of its own: two benchmarks at once must not share one (the second
  // would be refused by the first's lock). Removed when the benchmark ends.
  char scratch[] = "/tmp/tda_bench_run_XXXXXX";
  TDA_CHECK(::mkdtemp(scratch), "bench train: cannot create a scratch directory in /tmp");
  struct Remove {
    std::string dir;
    ~Remove() { remove_tree(dir); }
  } remove{scratch};
  to.out_dir = scratch;
  to.profile = r.count("profile") > 0;
  Trainer trainer(cfg, to);
  trainer.train_step();  // warm-up: first-touch of buffers, BLAS thread start, cuBLASLt plans
  if (ProfileOps* p = trainer.profile()) {
    p->reset();  // the warm-up step's first touches are not the step's cost
    name_matmuls(*p, cfg.model, trainer.model().attention().proj_width());
  }
  const int steps = r["steps"].as<int>();
  TDA_CHECK(steps >= 1, "bench train: --steps must be >= 1");
  // Each step ends with the loss download (a sync), so the host clock is right on the CPU; on a
  // GPU the events say the same without the host's share of the last launch.
  std::vector<double> ms;
  std::unique_ptr<DeviceTimer> timer = device.timer();
  for (int i = 0; i < steps; ++i) {
    timer->start();
    trainer.train_step();
    timer->stop();
    ms.push_back(timer->ms());
  }
  double s = 0;
  for (double x : ms) s += x / 1000.0;
  const auto& m = cfg.model;
  const double flops_per_token = trainer.model().train_flops_per_token(m.seq_len);
  const double step_tokens = double(cfg.train.total_batch_tokens);
  double tokens = step_tokens * steps;
  double gflops = flops_per_token * tokens / s / 1e9;
  json out = {{"bench", "train"},
              {"attention", cfg.attention.kind},
              {"attention_impl", cfg.attention.impl},
              {"attention_impl_line", trainer.attention_impl_line()},
              {"device", cfg.train.device},
              {"dtype", cfg.train.dtype},
              {"params", trainer.model().param_count()},
              {"B", cfg.train.micro_batch},
              {"T", m.seq_len},
              {"grad_accum", trainer.grad_accum_steps()},
              {"steps", steps},
              {"ms_per_step", 1000.0 * s / steps},
              {"ms_per_step_median", median(ms)},
              {"tokens_per_s", tokens / s},
              {"tokens_per_s_median", step_tokens / (median(ms) / 1000.0)},
              {"flops_per_token", flops_per_token},
              {"gflops", gflops}};
  out["timer"] = device.clock();
  if (!backend->host_memory()) {
    out["device_name"] = device.name();
    // Everything this process holds on the device after the steps: tda allocates its arena,
    // weights, optimizer state and scratch once, so this is also its peak.
    out["device_mem_mb"] = (double(device.memory_used()) - double(mem0)) / double(1 << 20);
  } else {
    // The yardstick of a CPU step: its own SGEMM at the LM head's shape. (Not on a GPU: the
    // bf16 step's GEMMs are not this fp32 one.)
    int N = cfg.train.micro_batch * m.seq_len;
    double blas = matmul_gflops(*backend, N, m.vocab_size, m.d_model, 3);
    out["sgemm_gflops"] = blas;
    out["sgemm_shape"] = {N, m.vocab_size, m.d_model};
    out["sgemm_core"] = blas_core_name();  // OpenBLAS's kernel set (cpu_ops.h)
    out["ratio"] = gflops / blas;
  }
  if (ProfileOps* p = trainer.profile()) out["profile"] = profile_json(*p, steps);
  std::cout << out.dump() << std::endl;
  if (ProfileOps* p = trainer.profile()) print_profile(std::cout, *p, steps, median(ms));
  return 0;
}

// tda bench attention. CPU: bench_attention_cpu.cpp (random inputs, or --checkpoint).
// --device cuda --mode count (the default of the emulated build, which has no GPU: "time": "no
// GPU"): the tiled forward kernel runs on the inputs the kind's own forward gives its kernel for
// one random sequence (one head of 64, or the pair the Diff kinds make of two; RoPE, norms and
// thresholds as the kind computes them), and the tile counters give the FLOPs a dense tiled
// kernel does vs the work done. --mode time (the default of a GPU build): CUDA-event times of the
// layer and its kernels (bench_gpu.cpp).
int bench_attention_count(Ops& ops, const std::string& device,
                          const std::vector<std::string>& kinds, const std::vector<int>& Ts) {
  for (const auto& kind : kinds) {
    for (int T : Ts) {
      const AttnCall c = capture_attention_call(kind, T);  // an unknown kind throws
      const AttnArgs& a = c.args;
      const AttnMath m = a.math;
      const AttnTiles t = count_attention_tiles(ops, m, T, a.Dqk, a.Dv, a.scale, a.power, c.lambda,
                                                c.q, c.k, c.v, c.q2, c.k2, c.tau);
      json out = {{"bench", "attention"},
                  {"device", device},
                  {"mode", "count"},
                  {"kind", kind},
                  {"T", T},
                  {"time", ops.device().timed() ? "not timed (--mode count)" : "no GPU"}};
      const AttnFlops f = attention_flops(m, a.Dqk, a.Dv, t);
      const AttnFlops sm = attention_flops(AttnMath::kSoftmax, 64, 64, AttnTiles{0, t.total});
      out["tiles_total"] = t.total;
      out["tiles_skipped"] = t.skipped;
      out["skip_fraction"] = t.total ? double(t.skipped) / double(t.total) : 0.0;
      out["dense_gflop"] = f.dense / 1e9;
      out["done_gflop"] = f.done / 1e9;
      out["dense_softmax_gflop"] = sm.dense / 1e9;
      if (m == AttnMath::kEntmax) out["threshold_tiles"] = t.threshold;
      std::cout << out.dump() << std::endl;
    }
  }
  return 0;
}

int bench_attention(int argc, char** argv) {
  cxxopts::Options opts(argv[0], "Benchmark attention forward+backward of one layer");
  opts.add_options()("kind", "attention kind(s), comma separated, or 'all'",
                     cxxopts::value<std::string>()->default_value("all"))(
      "lengths", "sequence lengths, comma separated (also accepted as --T)",
      cxxopts::value<std::string>()->default_value("256,512,1024,2048,4096,8192"))(
      "reps", "timed repetitions (cpu: 1; cuda: 5, median reported)", cxxopts::value<int>())(
      "device", "cpu, or cuda", cxxopts::value<std::string>()->default_value("cpu"))(
      "mode",
      "cuda: 'time' (CUDA events; the default of a GPU build) or 'count' (tile counts and FLOPs "
      "of one head; the default of the emulated build, which has no GPU)",
      cxxopts::value<std::string>())("tokens",
                                     "cuda time: tokens per problem, B = max(1, tokens / T)",
                                     cxxopts::value<int>()->default_value("16384"))(
      "heads", "heads of dimension 64 (cuda time: even, default 16; cpu: default 1)",
      cxxopts::value<int>())(
      "checkpoint",
      "time the kernels on the q, k, v this checkpoint's model (its kind) computes from "
      "--tokens-file (cpu, or cuda --mode time)",
      cxxopts::value<std::string>())("tokens-file",
                                     "--checkpoint: token shard read in windows of T tokens",
                                     cxxopts::value<std::string>()->default_value(
                                         "data/tinyshakespeare/tiny_shakespeare_val.bin"))(
      "layer", "--checkpoint: time this layer's kernel calls (default: every layer, summed)",
      cxxopts::value<int>())("warmup", "cuda time: untimed repetitions first",
                             cxxopts::value<int>()->default_value("2"))(
      "impl",
      "cuda time: attention.impl of the timed calls: own (our kernels), cudnn or auto "
      "(docs/cuda.md)",
      cxxopts::value<std::string>()->default_value("own"))(
      "fwd-shapes",
      "cuda time: our forward's block shapes, rows x keys, a list of 0 (default), 64x64, 128x64, "
      "64x128: one line each (docs/cuda.md)",
      cxxopts::value<std::string>()->default_value("0"))(
      "deterministic",
      "cuda time: attention.deterministic of the timed calls, a list of 1 (our two backward "
      "kernels) and 0 (one kernel, dq by atomics): one line each (docs/cuda.md)",
      cxxopts::value<std::string>()->default_value("1"))(
      "bwd-stages",
      "cuda time: attention.bwd_stages of the timed calls, a list of 0 (default), 1, 2 (query "
      "tiles in flight in our backward): one line each (docs/cuda.md)",
      cxxopts::value<std::string>()->default_value("0"))("h,help", "help");
  alias_flag(argc, argv, "--T", "--lengths");
  auto r = opts.parse(argc, argv);
  if (r.count("help")) {
    std::cout << opts.help() << "\n";
    return 0;
  }
  std::vector<std::string> kinds = split_list(r["kind"].as<std::string>());
  if (kinds.size() == 1 && kinds[0] == "all") kinds = attention_kinds();
  std::vector<int> Ts;
  for (const auto& t : split_list(r["lengths"].as<std::string>())) Ts.push_back(std::stoi(t));
  const std::string device = r["device"].as<std::string>();
  TDA_CHECK(device == "cpu" || device == "cuda", "bench attention: --device must be cpu or cuda");
  std::unique_ptr<Ops> backend = make_ops(device);
  if (r.count("checkpoint")) {
    CheckpointAttnBench c;
    c.dir = r["checkpoint"].as<std::string>();
    c.tokens_file = r["tokens-file"].as<std::string>();
    c.layer = r.count("layer") ? r["layer"].as<int>() : -1;
    TDA_CHECK(!r.count("layer") || c.layer >= 0, "bench attention: --layer must be >= 0");
    TDA_CHECK(!r.count("mode") || r["mode"].as<std::string>() == "time",
              "bench attention: --checkpoint times kernels (--mode time)");
    const bool gpu = device == "cuda";
    c.reps = r.count("reps") ? r["reps"].as<int>() : gpu ? 5 : 1;
    c.warmup = gpu ? r["warmup"].as<int>() : 0;
    if (gpu) {
      c.tokens = r["tokens"].as<int>();
      c.heads = r.count("heads") ? r["heads"].as<int>() : 16;
    }
    return bench_checkpoint_attention(*backend, Ts, c);
  }
  if (device == "cuda") {
    const std::string mode = r.count("mode")             ? r["mode"].as<std::string>()
                             : backend->device().timed() ? "time"
                                                         : "count";
    TDA_CHECK(mode == "time" || mode == "count", "bench attention: --mode must be time or count");
    if (mode == "count") return bench_attention_count(*backend, device, kinds, Ts);
    GpuAttnBench o;
    o.tokens = r["tokens"].as<int>();
    if (r.count("heads")) o.heads = r["heads"].as<int>();
    o.warmup = r["warmup"].as<int>();
    o.impl = r["impl"].as<std::string>();
    check_attention_impl(o.impl);
    o.fwd_shapes.clear();
    for (const auto& v : split_list(r["fwd-shapes"].as<std::string>())) {
      const auto& built = tuning_shapes("forward");
      TDA_CHECK(v == "0" || std::count(built.begin(), built.end(), v) == 1,
                "bench attention: --fwd-shapes " + v + " must be 0, 64x64, 128x64 or 64x128");
      o.fwd_shapes.push_back(v == "0" ? AttnFwdShape{0, 0} : parse_fwd_shape(v));
    }
    o.deterministic.clear();
    for (const auto& v : split_list(r["deterministic"].as<std::string>())) {
      TDA_CHECK(v == "1" || v == "0", "bench attention: --deterministic " + v + " must be 1 or 0");
      o.deterministic.push_back(v == "1");
    }
    o.bwd_stages.clear();
    for (const auto& v : split_list(r["bwd-stages"].as<std::string>())) {
      TDA_CHECK(v == "0" || v == "1" || v == "2",
                "bench attention: --bwd-stages " + v + " must be 0, 1 or 2");
      o.bwd_stages.push_back(std::stoi(v));
    }
    if (r.count("reps")) o.reps = r["reps"].as<int>();
    return bench_attention_gpu(*backend, kinds, Ts, o);
  }
  TDA_CHECK(!r.count("mode"), "bench attention: --mode is for --device cuda");
  return bench_attention_cpu(kinds, Ts, r.count("reps") ? r["reps"].as<int>() : 1,
                             r.count("heads") ? r["heads"].as<int>() : 1);
}

int cmd_bench(int argc, char** argv) {
  const char* usage =
      "usage: tda bench <benchmark> [options]   (tda bench <benchmark> --help)\n\n"
      "  train      ms/step, tokens/s and GFLOP/s of a config's training step (JSON line)\n"
      "  attention  forward+backward time and memory of one attention kind over T\n"
      "  checkpoint time to write one checkpoint of a config's model, and its CRC32C share\n"
      "  dryrun     a CUDA training step without executing kernels: peak device memory, launch\n"
      "             validity, launches/GEMMs/host syncs per step (emulator, JSON lines)\n";
  if (argc < 2) {
    std::cerr << usage;
    return 2;
  }
  std::string what = argv[1];
  if (what == "-h" || what == "--help") {
    std::cout << usage;
    return 0;
  }
  std::string prog = std::string(argv[0]) + " " + what;
  argv[1] = const_cast<char*>(prog.c_str());
  if (what == "train") return bench_train(argc - 1, argv + 1);
  if (what == "attention") return bench_attention(argc - 1, argv + 1);
  if (what == "checkpoint") return bench_checkpoint(argc - 1, argv + 1);
  if (what == "dryrun") return bench_dryrun(argc - 1, argv + 1);
  throw Error("bench: unknown benchmark '" + what +
              "' (train, attention, checkpoint, dryrun; tda bench --help)");
}

RegisterCommand reg("bench", "benchmarks (train, attention, checkpoint, dryrun)", cmd_bench);

}  // namespace
}  // namespace tda
