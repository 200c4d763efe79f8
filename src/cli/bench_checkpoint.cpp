// tda bench checkpoint --config FILE [--dir DIR] [--set k=v]
// Prints one JSON line: the time to write one checkpoint of the config's model (model +
// optimizer + state, fsynced, as training does) and, on the same bytes, the time of the CRC32C
// checksums that writing includes (instruction and table paths), so their share can be read.
#include <chrono>
#include <cxxopts.hpp>
#include <iostream>
#include <vector>

#include "attention/registry.h"
#include "backend/make_ops.h"
#include "cli/config_flags.h"
#include "core/config.h"
#include "core/crc32c.h"
#include "core/error.h"
#include "core/fs.h"
#include "model/gpt2.h"
#include "train/checkpoint.h"

namespace tda {

int bench_checkpoint(int argc, char** argv) {
  cxxopts::Options opts(argv[0], "Benchmark checkpoint writing and its checksums");
  opts.add_options()("c,config", "JSON config", cxxopts::value<std::string>())(
      "dir", "scratch directory (a checkpoint is written there and removed)",
      cxxopts::value<std::string>()->default_value("/tmp/tda_bench_checkpoint"))(
      "set", "override a config key", cxxopts::value<std::vector<std::string>>())("h,help", "help");
  cxxopts::ParseResult r;
  int code = 0;
  if (!parse_config_command(opts, argc, argv, &r, &code)) return code;
  Config cfg = load_config(r["config"].as<std::string>(), set_flags(r));
  check_attention_sets(cfg, set_flags(r));
  auto ops = make_ops("cpu");
  GPT2 model(cfg.model, cfg.attention, *ops);
  model.init_weights(cfg.train.seed, cfg.train.init_scheme);
  const size_t P = model.flat_size();  // m, v laid out like the parameters
  std::vector<float> m(P, 1e-3f), v(P, 1e-6f);
  const std::vector<float> params = model.params_to_host();
  using clock = std::chrono::steady_clock;
  auto secs = [](clock::time_point t0) {
    return std::chrono::duration<double>(clock::now() - t0).count();
  };
  // The bytes save_checkpoint hashes: parameters and both moments.
  auto hash_all = [&](uint32_t (*f)(const void*, size_t, uint32_t)) {
    uint32_t x = 0;
    const std::vector<float>* bufs[] = {&params, &m, &v};
    for (const auto* buf : bufs) x ^= f(buf->data(), buf->size() * 4, 0);
    return x;
  };
  hash_all(crc32c);  // first touch
  auto t0 = clock::now();
  const uint32_t a = hash_all(crc32c);
  const double crc_s = secs(t0);
  t0 = clock::now();
  const uint32_t b = hash_all(crc32c_portable);
  const double table_s = secs(t0);
  TDA_CHECK(a == b, "bench checkpoint: CRC32C paths disagree");

  const std::string dir = r["dir"].as<std::string>();
  make_dirs(dir);
  TrainState st;
  st.config = cfg.raw;
  t0 = clock::now();
  save_checkpoint(dir + "/step_00000001", model, {{"exp_avg", m.data()}, {"exp_avg_sq", v.data()}},
                  st);
  const double save_s = secs(t0);
  remove_tree(dir + "/step_00000001");
  const double gb = 3.0 * double(P) * 4 / 1e9;
  json out = {{"bench", "checkpoint"},     {"params", P},
              {"bytes_hashed_gb", gb},     {"save_s", save_s},
              {"crc32c_s", crc_s},         {"crc32c_gb_per_s", gb / crc_s},
              {"crc32c_table_s", table_s}, {"crc32c_share_of_save", crc_s / save_s}};
  std::cout << out.dump() << std::endl;
  return 0;
}

}  // namespace tda
