// Finite-difference gradient checks of every attention variant through its real forward and
// backward (proj -> y, loss L = sum y * R for a fixed random R, accumulated in double), and
// causality. The check is directional: for a random direction u restricted to one group
// (a column group of proj, or one extra parameter tensor),
//   fd = (L(x + h u) - L(x - h u)) / 2h   vs   an = <dL/dx, u>,
// and |fd - an| must be <= kRtol * |g_group| + max(kAtol, fp32 noise of L / step), where
// |g_group| (the 2-norm of the analytic gradient on the group) is the expected size of <g, u>
// for u ~ N(0, I); the noise term only matters where the gradient is ~0 (e.g. T = 1, where a
// Diff head's RMSNorm makes y invariant to lambda).
// Step h = 1e-3 on O(1) inputs: the fp32 forward's rounding noise in L (~1e-6 on ~1e4 terms)
// divided by 2h stays ~1e-3, and the O(h^2) truncation and the rare rectifier kink crossed by
// the step stay below 1e-3 relative; kRtol = 1e-2 leaves a margin of 10. The negative controls
// in test_attention_kernels.cpp show that a dropped term breaks this same comparison.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>

#include "backend/forwarding_ops.h"
#include "test_attention_util.h"
#include "test_kinds.h"
#include "test_util.h"

namespace tda {

namespace {

// The kind's step (AttentionTraits::fd_step: kinked weights take a 10x smaller one).
double fd_step(const AttnHarness& h) {
  if (std::getenv("TDA_FD_STEP")) return std::atof(std::getenv("TDA_FD_STEP"));
  return h.var->traits().fd_step;
}
double kStep = 1e-3;
constexpr double kRtol = 1e-2;
constexpr double kAtol = 1e-3;

// The paper's eleven kinds: each must be registered. The gradient and causality checks below run
// every registered kind (attention_kinds()), so a new kind is covered without being listed.
const std::vector<std::string> kPaperKinds = {
    "softmax",      "gated_softmax", "ssmax",     "entmax", "lssa", "rela",
    "diff_softmax", "dex",           "diff_rela", "tra",    "tda"};

struct Group {
  std::string name;
  int param;  // -1: proj columns [c0, c1)
  int c0, c1;
};

std::vector<Group> groups(const AttnHarness& h) {
  std::vector<Group> g;
  const int C = h.cfg.model.d_model, W = h.var->proj_width();
  for (int c0 = 0; c0 < W; c0 += C)
    g.push_back({"proj[" + std::to_string(c0) + ":" + std::to_string(std::min(W, c0 + C)) + ")", -1,
                 c0, std::min(W, c0 + C)});
  for (size_t p = 0; p < h.specs.size(); ++p) g.push_back({h.specs[p].name, int(p), 0, 0});
  return g;
}

// Pointers to the entries of a group (proj entries or one parameter tensor) and their gradients.
void group_entries(AttnHarness& h, const Group& g, std::vector<float*>* x, std::vector<float>* gr) {
  x->clear();
  gr->clear();
  if (g.param >= 0) {
    for (size_t i = 0; i < h.params[size_t(g.param)].size(); ++i) {
      x->push_back(&h.params[size_t(g.param)][i]);
      gr->push_back(h.dparams[size_t(g.param)][i]);
    }
    return;
  }
  const int W = h.var->proj_width();
  for (int r = 0; r < h.B * h.T; ++r)
    for (int c = g.c0; c < g.c1; ++c) {
      x->push_back(&h.proj[size_t(r) * W + c]);
      gr->push_back(h.dproj[size_t(r) * W + c]);
    }
}

// Worst |fd - an| / (kRtol |g| + kAtol) over `dirs` random directions of one group (<= 1 passes).
// ReLU-type weights (rela, diff_rela; p = 1) have kinks: a direction whose +-h segment crosses
// one makes the one-sided differences disagree, (L+ - L0) - (L0 - L-) ~ jump * h instead of
// ~ L'' h^2. Such directions are detected by that disagreement and redrawn (at most 2 * dirs
// times); the analytic gradient must still match on every accepted direction.
double check_group(AttnHarness& h, const Group& g, int dirs, Rng& rng) {
  std::vector<float*> x;
  std::vector<float> gr;
  group_entries(h, g, &x, &gr);
  double gnorm = 0;
  for (float v : gr) gnorm += double(v) * v;
  gnorm = std::sqrt(gnorm);
  const double l0 = h.loss();
  // fp32 noise of L: each y carries a few ulps of error (more after the normalisations); the
  // errors of the sum of y*R add like a random walk. 16 ulps of the root-sum-square of y*R.
  double rss = 0;
  for (size_t i = 0; i < h.y.size(); ++i) rss += double(h.y[i]) * h.R[i] * h.y[i] * h.R[i];
  const double noise_L = 16.0 * std::ldexp(1.0, -24) * std::sqrt(rss);
  double worst = 0;
  int accepted = 0, redrawn = 0;
  while (accepted < dirs) {
    std::vector<float> u(x.size()), x0(x.size());
    double an = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      u[i] = rng.normal();
      x0[i] = *x[i];
      an += double(gr[i]) * u[i];
    }
    for (size_t i = 0; i < x.size(); ++i) *x[i] = float(x0[i] + kStep * u[i]);
    const double lp = h.loss();
    for (size_t i = 0; i < x.size(); ++i) *x[i] = float(x0[i] - kStep * u[i]);
    const double lm = h.loss();
    for (size_t i = 0; i < x.size(); ++i) *x[i] = x0[i];
    // the step actually taken is the fp32-rounded one: divide by it, not by 2h
    double step2 = 0, un = 0;
    for (size_t i = 0; i < x.size(); ++i) un += double(u[i]) * u[i];
    for (size_t i = 0; i < x.size(); ++i)
      step2 += (double(float(x0[i] + kStep * u[i])) - double(float(x0[i] - kStep * u[i]))) * u[i];
    const double fd = (lp - lm) / step2 * un;
    const double tol = kRtol * gnorm + std::max(kAtol, noise_L * un / step2);
    const double kink = std::fabs((lp - l0) - (l0 - lm)) * 2.0 / step2 * un;
    if (kink > 0.5 * tol && redrawn < 2 * dirs) {
      ++redrawn;
      continue;
    }
    ++accepted;
    worst = std::max(worst, std::fabs(fd - an) / tol);
  }
  return worst;
}

void perturb_params(AttnHarness& h, Rng& rng) {
  for (size_t p = 0; p < h.params.size(); ++p)
    for (auto& v : h.params[p]) v += 0.1f * rng.normal();
}

// Ties the token-0 rows of the kind's (q, k) column groups (AttentionTraits::empty_row_qk) so
// that row 0 has no survivor: s_00 = <q_0, k_0> with q_0 = -k_0 (RoPE is the identity at
// position 0). Returns whether the kind's rows can be emptied.
bool kill_row0(AttnHarness& h) {
  const auto pairs = h.var->traits().empty_row_qk;
  const int W = h.var->proj_width();
  for (int b = 0; b < h.B; ++b)
    for (auto qk : pairs)
      for (int c = qk.first; c < qk.second; ++c) {
        float* row = h.proj.data() + size_t(b) * h.T * W;
        row[c] = -row[c + qk.second - qk.first];
      }
  return !pairs.empty();
}

// After kill_row0, every batch's row 0 is exactly zero (what the traits promise).
void check_row0_empty(const AttnHarness& h) {
  const int C = h.cfg.model.d_model;
  for (int b = 0; b < h.B; ++b)
    for (int c = 0; c < C; ++c) REQUIRE(h.y[size_t(b) * h.T * C + c] == 0.f);
}

bool registered(const std::string& kind) {
  for (const auto& k : attention_kinds())
    if (k == kind) return true;
  return false;
}

}  // namespace

TEST_CASE("attention: all eleven mechanisms are registered", "[attention]") {
  for (const auto& kind : kPaperKinds) {
    INFO(kind);
    CHECK(registered(kind));
  }
}

// `tda kinds --json` is what the scripts read (report labels and order, the GPU kit's list): every
// registered kind, its declared math and parameters as the variant built from the default config
// gives them, a label and summary; the paper's eleven first, in its tables' order (the report's
// row order). `--names` lists the same kinds in the same order.
TEST_CASE("tda kinds: every registered kind with its label, math and parameters",
          "[attention][cli]") {
  std::string out;
  REQUIRE(run_tda("kinds --json", &out) == 0);
  const json k = json::parse(out);
  REQUIRE(k.size() == attention_kinds().size());
  std::string names;
  REQUIRE(run_tda("kinds --names", &names) == 0);
  std::string want_names;
  for (size_t i = 0; i < k.size(); ++i) {
    const std::string name = k[i].at("name");
    INFO(name);
    want_names += name + "\n";
    CHECK(registered(name));
    CHECK(!k[i].at("label").get<std::string>().empty());
    CHECK(!k[i].at("summary").get<std::string>().empty());
    const Config cfg = attn_test_config(name);
    const auto v = make_attention(cfg.model, cfg.attention);
    CHECK(k[i].at("math") == attn_math_name(v->math()));
    std::vector<std::string> params;
    for (const auto& p : v->extra_params(0)) params.push_back(p.name);
    CHECK(k[i].at("params").get<std::vector<std::string>>() == params);
    if (i < kPaperKinds.size()) {
      CHECK(name == kPaperKinds[i]);
      CHECK(k[i].at("paper_row") == int(i));
    } else {
      CHECK(k[i].at("paper_row") == -1);
    }
  }
  CHECK(names == want_names);
  CHECK(k[0].at("label") == "Softmax");
  CHECK(k[10].at("label") == "TDA");
}

// `tda bench` and the diagnostics drive a kind through its declared math(): it must be the math
// the kind's forward actually runs.
TEST_CASE("attention: every registered kind declares the kernel math its forward runs",
          "[attention]") {
  struct RecordMath final : ForwardingOps {
    using ForwardingOps::ForwardingOps;
    std::vector<AttnMath> seen;
    void attention_forward(const AttnArgs& a) override {
      seen.push_back(a.math);
      ForwardingOps::attention_forward(a);
    }
  };
  REQUIRE(attention_kinds().size() >= kPaperKinds.size());
  for (const auto& kind : attention_kinds()) {
    INFO(kind);
    AttnHarness h(attn_test_config(kind), 1, 5, 3);
    RecordMath rec(h.ops);
    AttnContext c = h.ctx();
    const AttnContext rc{rec, c.B, c.T, c.layer, c.n_layer, c.step, c.cos, c.sin, c.pos0};
    h.var->forward(rc, h.proj.data(), h.y.data(), h.act.data(), h.ptrs(h.params));
    REQUIRE(rec.seen.size() == 1);
    CHECK(int(rec.seen[0]) == int(h.var->math()));
  }
}

TEST_CASE("attention: finite-difference gradients of every variant", "[attention]") {
  for (const auto& kind : test_kinds())
    for (int T : {1, 17, 70}) {
      Config cfg = attn_test_config(kind);
      AttnHarness h(cfg, 2, T, 1234 + T);
      kStep = fd_step(h);
      if (kind == "dex") h.step = 300;  // mid-anneal: both lambda terms of dex are active
      Rng rng(99 + T);
      perturb_params(h, rng);
      // at T = 1 an empty row 0 would leave nothing alive to check
      const bool emptied = T > 1 && kill_row0(h);
      h.grads();
      if (emptied) check_row0_empty(h);
      for (float v : h.dproj) REQUIRE(std::isfinite(v));
      for (auto& dp : h.dparams)
        for (float v : dp) REQUIRE(std::isfinite(v));
      for (const auto& g : groups(h)) {
        const double w = check_group(h, g, 3, rng);
        if (std::getenv("TDA_TEST_VERBOSE"))
          std::printf("%-14s T=%-3d %-16s err/tol %.3g\n", kind.c_str(), T, g.name.c_str(), w);
        INFO(kind << " T=" << T << " group " << g.name << " worst err/tol " << w);
        CHECK(w <= 1.0);
      }
    }
}

TEST_CASE("attention: threshold kinds with many empty rows keep exact and finite gradients",
          "[attention]") {
  // beta = 2.5 puts tau_i above most cosines: most rows have no survivor, their y is exactly 0,
  // and the gradient is still the derivative (dead rows contribute nothing).
  for (const std::string kind : {"tra", "tda"}) {
    Config cfg = attn_test_config(kind, 128, 2, json{{"beta", 2.5}});
    AttnHarness h(cfg, 2, 70, 77);
    kStep = fd_step(h);
    Rng rng(5);
    REQUIRE(kill_row0(h));
    h.grads();
    check_row0_empty(h);
    const int C = cfg.model.d_model, D = cfg.model.head_dim();
    int dead = 0;
    for (int r = 0; r < h.B * h.T; ++r)
      for (int hd = 0; hd < C / D; ++hd) {
        bool zero = true;
        for (int d = 0; d < D; ++d) zero = zero && h.y[size_t(r) * C + hd * D + d] == 0.f;
        dead += zero;
      }
    INFO(kind << ": " << dead << " of " << h.B * h.T * C / D << " (token, head) rows are empty");
    CHECK(dead > h.B * h.T / 4);
    for (float v : h.dproj) REQUIRE(std::isfinite(v));
    for (const auto& g : groups(h)) {
      const double w = check_group(h, g, 3, rng);
      INFO(kind << " group " << g.name << " worst err/tol " << w);
      CHECK(w <= 1.0);
    }
  }
}

// attention.tda_heads "halved" (parameter-matched TDA): H/2 heads with q/k views of d and values
// of 2d. Two halved heads (d_model 256, n_head 4), so a head-indexing slip shows.
TEST_CASE("attention: finite-difference gradients of parameter-matched TDA (tda_heads halved)",
          "[attention]") {
  for (int T : {1, 17, 70}) {
    Config cfg = attn_test_config("tda", 256, 4, json{{"tda_heads", "halved"}});
    AttnHarness h(cfg, 2, T, 555 + T);
    REQUIRE(h.var->proj_width() == 3 * cfg.model.d_model);  // softmax's c_attn width
    kStep = fd_step(h);
    Rng rng(31 + T);
    perturb_params(h, rng);
    h.grads();
    for (float v : h.dproj) REQUIRE(std::isfinite(v));
    for (const auto& g : groups(h)) {
      const double w = check_group(h, g, 3, rng);
      INFO("tda halved T=" << T << " group " << g.name << " worst err/tol " << w);
      CHECK(w <= 1.0);
    }
  }
}

// alpha-entmax other than 1.5 (the bisection solver; its backward weight p^(2 - alpha)).
TEST_CASE("attention: finite-difference gradients of alpha-entmax (alpha 1.25, 1.75)",
          "[attention]") {
  for (double alpha : {1.25, 1.75})
    for (int T : {1, 17, 70}) {
      Config cfg = attn_test_config("entmax", 128, 2,
                                    json{{"entmax_alpha", alpha}, {"entmax_solver", "bisect"}});
      AttnHarness h(cfg, 2, T, 777 + T);
      kStep = fd_step(h);
      Rng rng(41 + T);
      h.grads();
      for (float v : h.dproj) REQUIRE(std::isfinite(v));
      for (const auto& g : groups(h)) {
        const double w = check_group(h, g, 3, rng);
        INFO("entmax alpha " << alpha << " T=" << T << " group " << g.name << " worst err/tol "
                             << w);
        CHECK(w <= 1.0);
      }
    }
}

TEST_CASE("attention: outputs at or before i ignore proj rows after i (causality)", "[attention]") {
  for (const auto& kind : test_kinds()) {
    Config cfg = attn_test_config(kind);
    AttnHarness h(cfg, 2, 70, 4321);
    h.forward();
    const std::vector<float> y0 = h.y;
    const int W = h.var->proj_width(), C = cfg.model.d_model, i = 40;
    Rng rng(8);
    for (int b = 0; b < h.B; ++b)
      for (int t = i + 1; t < h.T; ++t)
        for (int c = 0; c < W; ++c) h.proj[(size_t(b) * h.T + t) * W + c] = 3.f * rng.normal();
    h.forward();
    size_t changed_after = 0;
    for (int b = 0; b < h.B; ++b)
      for (int t = 0; t < h.T; ++t)
        for (int c = 0; c < C; ++c) {
          const size_t idx = (size_t(b) * h.T + t) * C + c;
          if (t <= i) {
            INFO(kind << " b=" << b << " t=" << t << " c=" << c);
            REQUIRE(h.y[idx] == y0[idx]);  // bit-identical: rows <= i never read later keys
          } else {
            changed_after += h.y[idx] != y0[idx];
          }
        }
    INFO(kind);
    CHECK(changed_after > 0);  // the perturbation itself is visible
  }
}

}  // namespace tda
