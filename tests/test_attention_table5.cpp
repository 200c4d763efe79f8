// What the paper's Table 5 and the attention performance model stand on, without a GPU:
//  - tda bench attention --checkpoint: a trained model's q, k, v timed on the CPU and on the
//    emulated GPU (the kit's trained rows), with its tile counts and exact zeros;
//  - scripts/bench/attention_model.py: its calibration reproduces the committed H200 kernel
//    times within its stated error, and what it says of unmeasured shapes is labelled predicted.
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "test_char_shards.h"
#include "test_eval_util.h"
#include "test_util.h"

namespace tda {

namespace {
using json = nlohmann::json;

// Causal (query block, key tile) pairs of one (b, h) slice: 64-row blocks up to the diagonal.
long long causal_pairs(int T) {
  const long long nb = (T + 63) / 64;
  return nb * (nb + 1) / 2;
}
}  // namespace

TEST_CASE("bench attention --checkpoint: a trained model's q, k, v on the CPU and emulated GPU",
          "[bench][cuda]") {
  TempDir dir;
  const std::string ckpt = dir.path + "/ckpt";
  write_tiny_checkpoint(ckpt, "tra", 256);  // 2 layers, 2 heads of 64
  const std::string tokens = char_shards() + "/val.bin";
  std::string out;
  REQUIRE(
      run_tda("bench attention --checkpoint " + ckpt + " --tokens-file " + tokens + " --T 64,200",
              &out) == 0);
  auto lines = json_lines(out);
  REQUIRE(lines.size() == 2);
  for (const auto& j : lines) {
    INFO(j.dump());
    const int T = j.at("T");
    CHECK(j.at("kind") == "tra");
    CHECK(j.at("source") == "checkpoint");
    CHECK(j.at("step") == 300);
    CHECK(j.at("layer") == "all");
    CHECK(j.at("layers_timed") == 2);
    CHECK(j.at("B") == 1);
    CHECK(j.at("heads") == 2);
    CHECK(j.at("kernel_fwd_ms").get<double>() > 0);
    CHECK(j.at("kernel_bwd_ms").get<double>() > 0);
    // every causal pair of both layers' 2 heads, counted by the kernels
    CHECK(j.at("tiles_total") == 2 * 2 * causal_pairs(T));
    // a skipped pair is 64 x 64 zeros (at least 2080 causal ones on a diagonal): the exact zeros
    // can be no fewer than the skipped pairs hold
    const double causal = 2.0 * 2 * T * (T + 1) / 2;
    const double zeros = j.at("exact_zero_fraction").get<double>() * causal;
    CHECK(zeros >= j.at("tiles_skipped").get<double>() * 2080 - 1e-6);
    CHECK(j.at("exact_zero_fraction").get<double>() <= 1.0);
  }

  // One layer; on the emulated GPU the windows make the random problem's slices: max(1, 256 /
  // 128) sequences x 4 heads / the model's 2 = 4 windows of 2 heads.
  REQUIRE(run_tda("bench attention --device cuda --mode time --checkpoint " + ckpt +
                      " --tokens-file " + tokens +
                      " --T 128 --layer 1 --tokens 256 --heads 4 --reps 2 --warmup 1",
                  &out) == 0);
  lines = json_lines(out);
  REQUIRE(lines.size() == 1);
  const json& g = lines[0];
  INFO(g.dump());
  CHECK(g.at("timer") == "emulated (host clock)");
  CHECK(g.at("layer") == 1);
  CHECK(g.at("layers_timed") == 1);
  CHECK(g.at("B") == 4);
  CHECK(g.at("heads") == 2);
  CHECK(g.at("reps") == 2);
  CHECK(g.at("tiles_total") == 4 * 2 * causal_pairs(128));
  CHECK(g.at("kernel_bwd_ms").get<double>() > 0);
  CHECK_FALSE(g.contains("threshold_tiles"));  // tra has no threshold search

  // Entmax on the emulated GPU: the tiles its threshold search computed on the model's scores,
  // and without its tile skip, where every pass computes every causal pair (the max pass and at
  // least one more, per layer and head).
  const std::string ent = dir.path + "/entmax";
  write_tiny_checkpoint(ent, "entmax", 256);
  REQUIRE(run_tda("bench attention --device cuda --mode time --checkpoint " + ent +
                      " --tokens-file " + tokens + " --T 130 --tokens 130 --heads 2 --reps 1",
                  &out) == 0);
  lines = json_lines(out);
  REQUIRE(lines.size() == 1);
  const json& e = lines[0];
  INFO(e.dump());
  const long long thr = e.at("threshold_tiles"), dense = e.at("threshold_tiles_dense");
  CHECK(dense >= 2 * 2 * 2 * causal_pairs(130));
  CHECK(thr <= dense);
  CHECK(thr >= 2 * 2 * (causal_pairs(130) + 3));  // the max pass, then a diagonal tile per block
  CHECK(e.at("threshold_skip_fraction").get<double>() == Approx(1.0 - double(thr) / dense));

  CHECK(run_tda("bench attention --checkpoint " + ckpt + " --tokens-file " + tokens +
                    " --T 64 --layer 2",
                &out) != 0);
  CHECK_THAT(out, Catch::Contains("--layer 2 but " + ckpt + " has 2 layers"));
  CHECK(run_tda("bench attention --device cuda --mode count --checkpoint " + ckpt + " --T 64",
                &out) != 0);
  CHECK_THAT(out, Catch::Contains("--checkpoint times kernels (--mode time)"));
}

TEST_CASE("attention_model.py reproduces the H200 kernel times within its stated error",
          "[bench]") {
  const std::string py = source_dir() + "/.venv/bin/python";
  if (run_command(py + " -c 'import numpy, scipy'") != 0) {
    TDA_SKIP("needs the venv's python with numpy and scipy");
  }
  std::string out;
  REQUIRE(run_command(py + " " + source_dir() + "/scripts/bench/attention_model.py --json", &out) ==
          0);
  const json m = json::parse(out);
  // The measurements, read here from the committed report, not from the model's output.
  std::ifstream f(source_dir() + "/docs/results/gpu-h200-2026-11-26/report.json");
  const json rep = json::parse(f);
  std::map<std::pair<std::string, int>, double> measured;  // fwd + bwd kernel ms
  for (const auto& a : rep.at("attention"))
    measured[{a.at("kind"), a.at("T")}] =
        a.at("kernel_fwd_ms").get<double>() + a.at("kernel_bwd_ms").get<double>();
  REQUIRE(measured.size() == 22);  // 11 kinds x T 1024, 4096

  const double fit_bound = m.at("stated_error").at("fit");
  const double loo_bound = m.at("stated_error").at("leave_one_out");
  CHECK(fit_bound <= 0.25);  // what docs/perf.md quotes
  CHECK(loo_bound <= 0.30);
  std::map<std::pair<std::string, int>, std::array<double, 3>> sums;  // measured, fit, loo
  for (const auto& r : m.at("calibration")) {
    CHECK(r.at("label") == "measured");
    auto& s = sums[{r.at("kind"), r.at("T")}];
    s[0] += r.at("measured_ms").get<double>();
    s[1] += r.at("fit_ms").get<double>();
    s[2] += r.at("loo_ms").get<double>();
  }
  REQUIRE(sums.size() == measured.size());
  for (const auto& [key, s] : sums) {
    INFO(key.first << " T " << key.second);
    CHECK(s[0] == Approx(measured.at(key)).epsilon(1e-9));
    CHECK(std::fabs(s[1] / s[0] - 1) <= fit_bound);
    CHECK(std::fabs(s[2] / s[0] - 1) <= loo_bound);
  }
  // Predictions: only at lengths the run did not measure, each labelled so.
  const json& preds = m.at("predictions");
  REQUIRE(preds.size() == 22);
  for (const auto& p : preds) {
    CHECK(p.at("label") == "predicted");
    CHECK(measured.count({p.at("kind"), p.at("T")}) == 0);
    CHECK(p.at("total_ms").get<double>() > 0);
    // the single backward kernel: where attn_backward_atomic serves the kind (head dims <= 64:
    // not the paired (64, 128) kinds), below the two kernels' time
    const std::string kind = p.at("kind");
    const bool served = kind != "diff_softmax" && kind != "diff_rela";
    CHECK(p.at("bwd_atomic_ms").is_null() == !served);
    if (served) CHECK(p.at("bwd_atomic_ms").get<double>() < p.at("bwd_ms").get<double>());
  }
  // ... and at the calibration's lengths, beside the two kernels' measurement: predicted only
  const json& atomic = m.at("atomic_backward");
  CHECK(atomic.size() == 2 * 9);  // T 1024, 4096 x the 9 kinds it serves
  for (const auto& a : atomic) {
    CHECK(a.at("label") == "predicted");
    CHECK(a.at("bwd_atomic_ms").get<double>() < a.at("bwd_fit_ms").get<double>());
  }

  // Entmax's threshold passes come from the tile counts where given (threshold_tiles /
  // tiles_total, as tda bench attention --device cuda prints them): the calibration's 33 leave
  // the prediction as it was; 5 shrink the forward (the search is in it), not the backward.
  auto entmax_at_16k = [&](int passes) {
    TempDir dir;
    const std::string tiles = dir.path + "/tiles.jsonl";
    std::ofstream(tiles) << json{{"bench", "attention"}, {"kind", "entmax"},
                                 {"T", 16384},           {"tiles_total", 32896},
                                 {"tiles_skipped", 0},   {"threshold_tiles", 32896LL * passes}}
                                .dump()
                         << "\n";
    std::string o;
    REQUIRE(run_command(py + " " + source_dir() +
                            "/scripts/bench/attention_model.py --json --T 16384 --tiles " + tiles,
                        &o) == 0);
    const json got = json::parse(o);
    for (const auto& p : got.at("predictions"))
      if (p.at("kind") == "entmax") return p;
    FAIL("no entmax prediction");
    return json();
  };
  json base;
  for (const auto& p : preds)
    if (p.at("kind") == "entmax" && p.at("T") == 16384) base = p;
  REQUIRE(base.is_object());
  const json p33 = entmax_at_16k(33), p5 = entmax_at_16k(5);
  CHECK(p33.at("fwd_ms").get<double>() == Approx(base.at("fwd_ms").get<double>()));
  CHECK(p5.at("fwd_ms").get<double>() < 0.5 * p33.at("fwd_ms").get<double>());
  CHECK(p5.at("bwd_ms").get<double>() == Approx(p33.at("bwd_ms").get<double>()));
  CHECK_THAT(p5.at("skip_from").get<std::string>(), Catch::Contains("5.00 threshold passes"));
}

}  // namespace tda
