// Attention diagnostics (attention-variants.md §13, src/eval/diagnostics.h): maps rebuilt from a
// random-init tiny model are causal and follow each mechanism's definition; the metrics match
// a hand-computed 3x3 example.
#include <catch2/catch.hpp>
#include <cmath>

#include "attention/common.h"
#include "attention/registry.h"
#include "backend/cpu/cpu_ops.h"
#include "core/config.h"
#include "core/rng.h"
#include "eval/diagnostics.h"
#include "model/gpt2.h"
#include "test_kinds.h"

using namespace tda;

namespace {

struct Probe {
  CpuOps cpu;
  ProbeOps probe{cpu};
  Config cfg;
  std::unique_ptr<GPT2> model;
  json report;
  explicit Probe(const std::string& kind, int T = 24, const std::string& extra_set = "") {
    std::vector<std::string> sets{"model.n_layer=2", "model.d_model=64", "model.seq_len=512",
                                  "train.micro_batch=2"};
    if (!extra_set.empty()) sets.push_back(extra_set);
    cfg = load_kind_config("tiny", kind, sets);
    model = std::make_unique<GPT2>(cfg.model, cfg.attention, probe);
    model->init_weights(11);
    // Matrices 5x GPT-2's init so the maps are far from uniform.
    model->update_params([&](float* P) {
      for (const auto& t : model->tensors())
        if (t.shape.size() == 2)
          for (size_t i = 0; i < t.numel; ++i) P[t.offset + i] *= 5.f;
    });
    std::vector<int32_t> tok(static_cast<size_t>(T));
    Rng rng(5);
    for (auto& t : tok) t = int32_t(rng.below(1000));
    report = run_diagnostics(*model, probe, {tok}, DiagOptions{1, 0, 0});
    // The maps again through the model's own forward (not the KV-cache path run_diagnostics
    // takes): the tests compare the report against these.
    std::vector<float> logits(size_t(cfg.model.vocab_size));
    model->forward_logits(tok.data(), T, logits.data());
  }
};

float dotf(const float* a, const float* b, int D) {
  float s = 0.f;
  for (int d = 0; d < D; ++d) s += a[d] * b[d];
  return s;
}

}  // namespace

TEST_CASE("diag metrics match a hand-computed 3x3 map", "[diag]") {
  // row 0: [1];  row 1: [0.5 -0.5];  row 2: dead.  Entries above the diagonal are never read.
  const float A[9] = {1.f, 7.f, 7.f, 0.5f, -0.5f, 7.f, 0.f, 0.f, 0.f};
  const MapStats s = map_stats(A, 3);
  CHECK(s.sparsity == Approx(3.0 / 6.0));
  CHECK(s.max_abs == Approx(1.0));
  CHECK(s.mean_survivors == Approx(1.0));  // (1 + 2 + 0) / 3
  CHECK(s.dead_rows == Approx(1.0 / 3.0));
  CHECK(s.mean_entropy == Approx(std::log(2.0) / 3.0));  // H = 0, log 2, 0
  CHECK(s.mean_dispersion == Approx(0.5));               // (log2/log2 + 0/log3) / 2
  // A~_0 = (1 + 0.5 + 0)/3, uniform (1 + 1/2 + 1/3)/3  ->  9/11
  CHECK(s.gsink0 == Approx(9.0 / 11.0));
}

TEST_CASE("diag maps are causal for every kind and softmax rows sum to one", "[diag]") {
  for (const std::string& kind : test_kinds()) {
    INFO(kind);
    Probe p(kind);
    const int T = p.report["T"];
    REQUIRE(p.probe.layers.size() == 2);
    for (const auto& L : p.probe.layers)
      for (const auto& hv : L.head_views)
        for (const auto& A : hv)
          for (int i = 0; i < T; ++i)
            for (int j = i + 1; j < T; ++j) REQUIRE(A[size_t(i) * T + j] == 0.f);
    const AttentionTraits traits = make_attention(p.cfg.model, p.cfg.attention)->traits();
    if (traits.normalised) {
      for (const auto& L : p.probe.layers)
        for (const auto& hv : L.head_views)
          for (int i = 0; i < T; ++i) {
            double sum = 0;
            for (int j = 0; j <= i; ++j) sum += hv[0][size_t(i) * T + j];
            REQUIRE(sum == Approx(1.0).epsilon(1e-4));
          }
    }
    if (traits.dense) {
      CHECK(p.report["means"]["effective"]["sparsity"].get<double>() == 0.0);
      CHECK(p.report["means"]["effective"]["dead_rows"].get<double>() == 0.0);
    }
    if (kind == "diff_softmax") CHECK(p.report["means"]["view1"]["sparsity"].get<double>() == 0.0);
    // the dump holds T rows of T for each view
    CHECK(p.report["dump"]["effective"].size() == size_t(T));
  }
}

TEST_CASE("diag TRA and TDA maps equal max(s - tau 0)^p recomputed from q and k", "[diag]") {
  for (const std::string kind : {"tra", "tda"}) {
    INFO(kind);
    Probe p(kind);
    const int T = p.report["T"];
    const auto& a = p.probe.calls.at(1);
    const auto& L = p.probe.layers.at(1);
    const int D = a.Dqk;
    // tau_i = max(beta, 0) c_i,  c_i = sqrt(2 max(0, log((i+1)/kappa)) / d)
    const double beta = p.cfg.attention.option<double>("beta"),
                 kappa = p.cfg.attention.option<double>("kappa");
    for (int i = 0; i < T; ++i) {
      const double c = std::sqrt(2.0 * std::max(0.0, std::log((i + 1) / kappa)) / D);
      REQUIRE(a.tau[i] == Approx(std::max(beta, 0.0) * c).margin(1e-6));
    }
    const bool two = kind == "tda";
    const float lam =
        two ? std::min(std::max(float(p.cfg.attention.option<double>("lambda_init")), 0.f), 1.f)
            : 0.f;
    if (two) CHECK(*a.lambda == Approx(lam));
    const size_t sqk = size_t(T) * D;
    int nonzero = 0, zero = 0;
    for (int h = 0; h < L.H; ++h)
      for (int i = 0; i < T; ++i)
        for (int j = 0; j <= i; ++j) {
          const float* q = a.q + h * sqk + size_t(i) * D;
          const float* k = a.k + h * sqk + size_t(j) * D;
          REQUIRE(std::sqrt(dotf(q, q, D)) == Approx(1.f).margin(1e-5));  // L2-normalised
          const double r1 = double(dotf(q, k, D)) - a.tau[i];
          const double a1 = r1 > 0 ? std::pow(r1, p.cfg.attention.option<int>("power")) : 0.0;
          const auto& hv = L.head_views[size_t(h)];
          const size_t e = size_t(i) * T + j;
          if (!two) {
            REQUIRE(hv[0][e] == Approx(a1).margin(1e-6));
          } else {
            const float* q2 = a.q2 + h * sqk + size_t(i) * D;
            const float* k2 = a.k2 + h * sqk + size_t(j) * D;
            const double r2 = double(dotf(q2, k2, D)) - a.tau[i];
            const double a2 = r2 > 0 ? std::pow(r2, p.cfg.attention.option<int>("power")) : 0.0;
            REQUIRE(hv[1][e] == Approx(a1).margin(1e-6));
            REQUIRE(hv[2][e] == Approx(a2).margin(1e-6));
            REQUIRE(hv[0][e] == Approx(a1 - lam * a2).margin(1e-6));
          }
          (a1 > 0 ? nonzero : zero)++;
        }
    CHECK(nonzero > 0);  // both regimes are exercised
    CHECK(zero > 0);
    CHECK(p.report["means"]["effective"]["sparsity"].get<double>() > 0.0);
  }
}

TEST_CASE("diag counts the dead 64 x 64 tiles the kernel skips", "[diag]") {
  for (const std::string kind : {"tra", "tda"}) {
    INFO(kind);
    // beta 1.2: tau_i is 1.2 sqrt(2 log(i+1)) ~ 3-4 standard deviations of a random cosine, so
    // some tiles keep a survivor and some do not.
    const int T = 300, kTile = 64, nb = (T + kTile - 1) / kTile;
    Probe p(kind, T, "attention.beta=1.2");
    long long all_skipped = 0, all_total = 0;
    for (size_t l = 0; l < p.probe.layers.size(); ++l) {
      const LayerMaps& L = p.probe.layers[l];
      long long dead = 0;
      for (int h = 0; h < L.H; ++h)
        for (int bi = 0; bi < nb; ++bi)
          for (int bj = 0; bj <= bi; ++bj) {
            bool any = false;  // a weight survives in some view (the views of a two-view kind)
            for (size_t v = L.head_views[size_t(h)].size() > 1 ? 1 : 0;
                 v < L.head_views[size_t(h)].size(); ++v)
              for (int i = bi * kTile; i < std::min(T, (bi + 1) * kTile); ++i)
                for (int j = bj * kTile; j <= std::min(i, (bj + 1) * kTile - 1); ++j)
                  any = any || L.head_views[size_t(h)][v][size_t(i) * T + j] != 0.f;
            dead += !any;
          }
      const json& jl = p.report["layers"][l];
      CHECK(jl["tiles_skipped"].get<long long>() == dead);
      CHECK(jl["tiles_total"].get<long long>() == L.H * nb * (nb + 1) / 2);
      all_skipped += dead;
      all_total += L.H * nb * (nb + 1) / 2;
    }
    CHECK(all_skipped > 0);  // both dead and live tiles occur
    CHECK(all_skipped < all_total);
    CHECK(p.report["tiles"]["skipped_fraction"].get<double>() ==
          Approx(double(all_skipped) / double(all_total)));
  }
}
