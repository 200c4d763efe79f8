// tda bench dryrun --config FILE [--set k=v] [--dtype fp32,bf16] [--device-gb 40,80] [--execute]
//
// A training step of a config on the emulated CUDA backend with no block executed (the
// emulator's dry run, docs/emulator.md): the real Trainer (model, attention variant, AdamW,
// gradient accumulation, CudaOps) runs its host code, every kernel launch is validated as the
// driver would (grid and block limits, dynamic shared memory), GEMMs check their operands, and
// device memory is counted as a GPU would count it but never committed. So a d12 step at
// B = 16, T = 1024, or B = 4 at T = 65,536, takes seconds, and says whether it fits and
// launches validly. Prints one JSON line per dtype:
//   peak device memory and the buffers that made it up, whether it fits each --device-gb;
//   kernel launches, GEMM calls and host synchronisations per optimizer step and per
//   micro-step; the largest grids (most blocks, largest y, largest z) and their kernels;
//   allocations made by a second step (0: nothing is allocated in the step loop); every kernel
//   the process launched, by its qualified name (scripts/check_spills.py reads it).
// The data are random tokens in a temporary shard; train.init_from is ignored (weights do not
// matter: downloads read zeros in a dry run). --execute runs the same measurement with every
// kernel executed (slow: small configs; the tests compare both). TDA_EMU_DEVICE_GB, when set,
// caps the emulated device (the run then fails where such a GPU would); otherwise the cap is
// lifted so the whole peak is measured and compared with each --device-gb.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cxxopts.hpp>
#include <iostream>
#include <memory>
#include <vector>

#include "attention/registry.h"
#include "backend/device.h"
#include "backend/make_ops.h"
#include "cli/command.h"
#include "cli/config_flags.h"
#include "core/config.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/rng.h"
#include "data/shard.h"
#include "train/trainer.h"

namespace tda {

namespace {

constexpr double kGiB = double(size_t(1) << 30);

json launch_json(const LaunchRecord& r) {
  return {{"kernel", r.kernel},
          {"grid", {r.grid[0], r.grid[1], r.grid[2]}},
          {"block", {r.block[0], r.block[1], r.block[2]}},
          {"shmem", r.shmem},
          {"blocks", r.blocks()}};
}

json counts_json(const DeviceStats& d) {
  return {{"launches", d.launches},
          {"gemms", d.gemms},
          {"gemm_epilogues", d.gemm_epilogues},
          {"host_syncs", d.host_syncs},
          {"downloads", d.downloads},
          {"uploads", d.uploads},
          {"device_copies", d.device_copies},
          {"allocations", d.allocations}};
}

// A temporary directory with shards of random tokens, one micro-batch each (train and val).
struct SyntheticData {
  std::string dir;
  std::vector<int32_t> tokens;  // B*T + 1 tokens, also a micro-batch for the model directly
  SyntheticData(int B, int T, int vocab, uint64_t seed) {
    char tmpl[] = "/tmp/tda_dryrun_XXXXXX";
    TDA_CHECK(mkdtemp(tmpl), "bench dryrun: cannot create a temporary directory in /tmp");
    dir = tmpl;
    Rng rng(seed);
    std::vector<uint16_t> t(size_t(B) * size_t(T) + 1);
    for (auto& x : t) x = uint16_t(rng.next_u64() % uint64_t(vocab));
    write_shard(dir + "/train.bin", t.data(), t.size());
    write_shard(dir + "/val.bin", t.data(), t.size());
    tokens.assign(t.begin(), t.end());
  }
  ~SyntheticData() { remove_tree(dir); }
};

json run_one(EmulatedDevice& emu, const std::string& config, std::vector<std::string> sets,
             const std::string& dtype, const std::vector<std::string>& device_gb, bool execute) {
  // The model config first, for the shard's shape.
  const Config probe = load_config(config, sets);
  const int B = probe.train.micro_batch, T = probe.model.seq_len;
  SyntheticData data(B, T, probe.model.real_vocab_size, probe.train.seed);
  sets.insert(sets.end(), {"train.device=cuda", "train.dtype=" + dtype,
                           "train.init_from=", "data.train=" + data.dir + "/train.bin",
                           "data.val=" + data.dir + "/val.bin"});
  const Config cfg = load_config(config, sets);
  check_attention_sets(cfg, sets);
  json out = {{"bench", "dryrun"},
              {"mode", execute ? "executed" : "dry"},
              {"kind", cfg.attention.kind},
              {"dtype", dtype},
              {"B", B},
              {"T", T},
              {"n_layer", cfg.model.n_layer},
              {"d_model", cfg.model.d_model}};
  if (!probe.train.init_from.empty()) out["init_from_ignored"] = probe.train.init_from;

  const auto t0 = std::chrono::steady_clock::now();
  emu.set_dry_run(!execute);
  emu.reset_peaks();
  const DeviceStats start = emu.stats();
  try {
    TrainOptions to;
    to.out_dir = data.dir + "/run";
    to.init_weights = execute;  // a dry run never reads them
    Trainer trainer(cfg, to);
    const DeviceStats built = emu.stats();
    trainer.train_step();  // the first step grows the backend's scratch buffers
    const DeviceStats one = emu.stats();
    trainer.train_step();
    const DeviceStats two = emu.stats();
    // One more micro-step alone: the model's forward and backward, as the step runs them.
    GPT2& model = trainer.model();
    const size_t N = size_t(B) * size_t(T);
    model.forward(data.tokens.data(), data.tokens.data() + 1, true, 1.0f / float(N));
    model.backward();
    const DeviceStats micro_end = emu.stats();
    const DeviceStats step = two.since(one), micro = micro_end.since(two);
    const int accum = trainer.grad_accum_steps();
    out["params"] = model.param_count();
    out["grad_accum"] = accum;
    out["per_step"] = counts_json(step);
    out["per_micro_step"] = counts_json(micro);
    // zero_grad, the grad norm, clipping (not counted: a dry run's norm reads 0), AdamW per
    // tensor, the bf16 weight recast.
    out["launches_outside_micro_steps"] = step.launches - uint64_t(accum) * micro.launches;
    out["allocations_first_step"] = one.since(built).allocations;
    out["allocations_second_step"] = step.allocations;
  } catch (const std::exception& e) {
    out["error"] = e.what();
  }
  emu.set_dry_run(false);
  const DeviceStats end = emu.stats();
  const DeviceStats all = end.since(start);
  out["launches_valid"] = all.invalid_launches == 0 && !out.contains("error");
  out["invalid_launches"] = all.invalid_launches;
  if (all.invalid_launches) out["last_launch"] = launch_json(end.last);
  out["peak_bytes"] = end.peak_bytes;
  out["peak_gib"] = double(end.peak_bytes) / kGiB;
  json buffers = json::object();
  for (const auto& [name, bytes] : end.at_peak) buffers[name] = double(bytes) / kGiB;
  out["peak_buffers_gib"] = buffers;
  json fits = json::object();
  for (const auto& g : device_gb) fits[g] = double(end.peak_bytes) <= std::stod(g) * kGiB;
  out["fits"] = fits;
  out["cap_gib"] = double(end.cap_bytes) / kGiB;
  out["largest_grid"] = launch_json(end.largest);
  out["max_grid_y"] = launch_json(end.max_y);
  out["max_grid_z"] = launch_json(end.max_z);
  out["kernels"] = end.kernels;  // since the process started: this dtype's and any earlier
  out["wall_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace

int bench_dryrun(int argc, char** argv) {
  cxxopts::Options opts(argv[0],
                        "A training step on the emulated CUDA backend without executing kernels: "
                        "memory, launches, syncs");
  opts.add_options()("c,config", "JSON config", cxxopts::value<std::string>())(
      "set", "override a config key", cxxopts::value<std::vector<std::string>>())(
      "dtype", "fp32, bf16 or both (comma separated)",
      cxxopts::value<std::string>()->default_value("fp32,bf16"))(
      "device-gb", "device sizes in GiB to judge the peak against (comma separated)",
      cxxopts::value<std::string>()->default_value("40,80"))(
      "execute", "execute every kernel (slow: small configs only; to compare with the dry run)")(
      "h,help", "help");
  cxxopts::ParseResult r;
  int code = 0;
  if (!parse_config_command(opts, argc, argv, &r, &code)) return code;
  EmulatedDevice* emu = make_ops("cuda")->device().emulator();
  TDA_CHECK(emu, "bench dryrun: needs the emulated CUDA backend (the default build)");
  const std::vector<std::string> dtypes = split_list(r["dtype"].as<std::string>());
  const std::vector<std::string> gbs = split_list(r["device-gb"].as<std::string>());
  for (const auto& d : dtypes)
    TDA_CHECK(d == "fp32" || d == "bf16", "bench dryrun: --dtype " + d + ": fp32 or bf16");
  for (const auto& g : gbs) {
    char* end = nullptr;
    const double v = std::strtod(g.c_str(), &end);
    TDA_CHECK(end != g.c_str() && !*end && v > 0,
              "bench dryrun: --device-gb " + g + ": a positive number of GiB");
  }
  // Measure the whole peak unless the user capped the device (then fail where it would).
  const char* cap = std::getenv("TDA_EMU_DEVICE_GB");
  if (!cap || !*cap) emu->set_memory_cap(size_t(1) << 40);  // 1 TiB
  int status = 0;
  for (const auto& dtype : dtypes) {
    const json out = run_one(*emu, r["config"].as<std::string>(), set_flags(r), dtype, gbs,
                             r.count("execute") > 0);
    if (out.contains("error") || !out["launches_valid"].get<bool>()) status = 1;
    std::cout << out.dump() << std::endl;
  }
  return status;
}

}  // namespace tda
