// Kernel-level attention tests (ops.attention_forward/backward directly): negative controls for
// the finite-difference comparison, entmax's simplex rows, tile skipping, and the TRA/TDA
// theorems measured on random unit vectors.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "attention/common.h"
#include "test_attention_util.h"

namespace tda {

namespace {

struct KernelCase {
  AttnMath math;
  int B = 1, H = 2, T = 70, D = 64;
  std::vector<float> q, k, v, q2, k2, out, out2, stats, tau, R;
  float lambda = 0.6f;
  AttnArgs args() {
    AttnArgs a;
    a.math = math;
    a.B = B;
    a.H = H;
    a.T = T;
    a.Dqk = D;
    a.Dv = D;
    a.scale = (math == AttnMath::kThreshold || math == AttnMath::kDiffThreshold)
                  ? 1.f
                  : 1.f / std::sqrt(float(D));
    a.q = q.data();
    a.k = k.data();
    a.v = v.data();
    if (attn_two_views(math)) {
      a.q2 = q2.data();
      a.k2 = k2.data();
    }
    a.out = out.data();
    a.out2 = out2.data();
    a.stats = stats.data();
    a.tau = tau.empty() ? nullptr : tau.data();
    a.power = 2;
    a.lambda = &lambda;
    return a;
  }
  KernelCase(AttnMath m, uint64_t seed, float qk_std = 1.f) : math(m) {
    Rng rng(seed);
    const size_t n = size_t(B) * H * T * D;
    for (auto* x : {&q, &k, &v, &q2, &k2, &R}) {
      x->resize(n);
      for (auto& e : *x) e = (x == &v || x == &R) ? rng.normal() : qk_std * rng.normal();
    }
    out.resize(n);
    out2.resize(n);
    stats.resize(size_t(B) * H * T * 2);
    if (m == AttnMath::kThreshold || m == AttnMath::kDiffThreshold) {
      tau.resize(size_t(T));
      attn_util::threshold_c(tau.data(), T, 1.0, D);
    }
  }
  double loss(CpuOps& ops) {
    ops.attention_forward(args());
    double L = 0;
    for (size_t i = 0; i < out.size(); ++i) L += double(out[i]) * R[i];
    return L;
  }
};

// Same directional comparison as test_attention_grad.cpp: |fd - an| <= 1e-2 |g| + 1e-3, h = 1e-3.
// Returns the worst err/tol over q, k, v (and q2, k2) with `drop` selecting the negative control.
double kernel_fd(AttnMath m, bool drop) {
  CpuOps ops;
  // q, k ~ N(0, 0.15^2): the threshold kinds' raw cosine-scale scores then straddle tau_i
  const bool thr = m == AttnMath::kThreshold || m == AttnMath::kDiffThreshold;
  KernelCase c(m, 31, thr ? 0.15f : 1.f);
  c.loss(ops);
  const size_t n = c.q.size();
  std::vector<float> dq(n), dk(n), dv(n), dq2(n), dk2(n);
  AttnArgs a = c.args();
  a.dout = c.R.data();
  a.dq = dq.data();
  a.dk = dk.data();
  a.dv = dv.data();
  a.dq2 = dq2.data();
  a.dk2 = dk2.data();
  cpu_attention_backward(a, drop);  // CpuOps::attention_backward, or its negative control
  std::vector<std::pair<std::vector<float>*, std::vector<float>*>> groups = {
      {&c.q, &dq}, {&c.k, &dk}, {&c.v, &dv}};
  if (attn_two_views(m)) {
    groups.push_back({&c.q2, &dq2});
    groups.push_back({&c.k2, &dk2});
  }
  Rng rng(3);
  const double h = 1e-3;
  double worst = 0;
  for (auto& gp : groups) {
    std::vector<float>& x = *gp.first;
    const std::vector<float>& g = *gp.second;
    double gn = 0;
    for (float e : g) gn += double(e) * e;
    gn = std::sqrt(gn);
    for (int dir = 0; dir < 2; ++dir) {
      std::vector<float> u(n), x0 = x;
      double an = 0, step2 = 0, un = 0;
      for (size_t i = 0; i < n; ++i) {
        u[i] = rng.normal();
        an += double(g[i]) * u[i];
        un += double(u[i]) * u[i];
      }
      for (size_t i = 0; i < n; ++i) x[i] = float(x0[i] + h * u[i]);
      const double lp = c.loss(ops);
      for (size_t i = 0; i < n; ++i) {
        step2 += (double(x[i]) - double(float(x0[i] - h * u[i]))) * u[i];
        x[i] = float(x0[i] - h * u[i]);
      }
      const double lm = c.loss(ops);
      x = x0;
      const double fd = (lp - lm) / step2 * un;
      worst = std::max(worst, std::fabs(fd - an) / (1e-2 * gn + 1e-3));
    }
  }
  return worst;
}

}  // namespace

TEST_CASE("attention kernels: FD check passes and fails when a backward term is dropped",
          "[attention]") {
  // Negative control: the same comparison must reject a backward with one term removed
  // (normalised kinds: the row constant D_i / c_i; rectifiers: the factor p of p r^(p-1)).
  for (AttnMath m : {AttnMath::kSoftmax, AttnMath::kSoftplus, AttnMath::kEntmax,
                     AttnMath::kThreshold, AttnMath::kDiffSoftmax, AttnMath::kDiffThreshold}) {
    const double ok = kernel_fd(m, false), bad = kernel_fd(m, true);
    if (std::getenv("TDA_TEST_VERBOSE"))
      std::printf("negative control math %d: correct %.3g, dropped term %.3g (err/tol)\n", int(m),
                  ok, bad);
    INFO("math " << int(m) << ": correct backward err/tol " << ok << ", dropped term " << bad);
    CHECK(ok <= 1.0);
    CHECK(bad > 3.0);
  }
}

TEST_CASE("attention kernels: entmax rows sum to 1 with exact zeros and sort == bisect",
          "[attention]") {
  // v_j = one-hot(j) (Dv = T) turns the output row into the probability row p_i.
  CpuOps ops;
  const int T = 64;
  Rng rng(11);
  std::vector<float> q(size_t(T) * 64), k(q.size()), v(size_t(T) * T, 0.f);
  for (auto& x : q) x = 2.f * rng.normal();  // sharp rows: plenty of exact zeros
  for (auto& x : k) x = rng.normal();
  for (int j = 0; j < T; ++j) v[size_t(j) * T + j] = 1.f;
  std::vector<float> p_sort(size_t(T) * T), p_bis(p_sort.size()), st(size_t(T) * 2);
  for (bool bisect : {false, true}) {
    AttnArgs a;
    a.math = AttnMath::kEntmax;
    a.B = a.H = 1;
    a.T = T;
    a.Dqk = 64;
    a.Dv = T;
    a.scale = 0.125f;
    a.q = q.data();
    a.k = k.data();
    a.v = v.data();
    a.out = bisect ? p_bis.data() : p_sort.data();
    a.stats = st.data();
    a.entmax_bisect = bisect;
    a.entmax_iters = 30;
    ops.attention_forward(a);
  }
  size_t zeros = 0, causal = 0;
  for (int i = 0; i < T; ++i) {
    double sum = 0;
    for (int j = 0; j < T; ++j) {
      const float p = p_sort[size_t(i) * T + j];
      if (j > i) {
        REQUIRE(p == 0.f);  // causal: never a weight on a future key
        continue;
      }
      ++causal;
      REQUIRE(p >= 0.f);
      zeros += p == 0.f;
      sum += p;
      // 30 bisection steps from a bracket of width < 1 pin tau to ~1e-9; fp32 rounding dominates
      CHECK(std::fabs(p - p_bis[size_t(i) * T + j]) < 1e-5);
    }
    CHECK(std::fabs(sum - 1.0) < 1e-5);  // fp32 sum of <= 64 terms
  }
  INFO(zeros << " exact zeros among " << causal << " causal entries");
  CHECK(zeros > causal / 4);
}

TEST_CASE("attention kernels: dead tiles are skipped and change nothing", "[attention]") {
  // All queries point along e0; keys 64..127 point along -e0 (cosine -1 < tau_i): every
  // (row block, key tile 1) pair is dead. Other keys are random unit vectors.
  for (AttnMath m : {AttnMath::kThreshold, AttnMath::kDiffThreshold, AttnMath::kRelu}) {
    CpuOps ops;
    const int T = 200, D = 64;
    KernelCase c(m, 5);
    c.B = 1;
    c.H = 1;
    c.T = T;
    Rng rng(17);
    const size_t n = size_t(T) * D;
    for (auto* x : {&c.q, &c.k, &c.q2, &c.k2, &c.v, &c.R, &c.out, &c.out2}) x->resize(n);
    for (auto* x : {&c.k, &c.k2, &c.v, &c.R})
      for (auto& e : *x) e = rng.normal();
    for (auto* kk : {&c.k, &c.k2}) {
      std::vector<float> norm(static_cast<size_t>(T));
      ops.l2norm_forward(kk->data(), norm.data(), size_t(T), D);
    }
    for (int i = 0; i < T; ++i)
      for (int d = 0; d < D; ++d) {
        c.q[size_t(i) * D + d] = c.q2[size_t(i) * D + d] = (d == 0);
        if (i >= 64 && i < 128) c.k[size_t(i) * D + d] = c.k2[size_t(i) * D + d] = -float(d == 0);
      }
    c.tau.resize(size_t(T));
    attn_util::threshold_c(c.tau.data(), T, 1.0, D);
    if (m == AttnMath::kRelu) c.tau.clear();
    std::vector<float> res[2];
    long long skipped[2] = {0, 0}, total[2] = {0, 0};
    for (int ns = 0; ns < 2; ++ns) {
      AttnArgs a = c.args();
      a.scale = 1.f;
      a.no_skip = ns == 1;
      a.tiles_skipped = &skipped[ns];
      a.tiles_total = &total[ns];
      ops.attention_forward(a);
      std::vector<float> dq(n), dk(n), dv(n), dq2(n), dk2(n), dtau(static_cast<size_t>(T)),
          dlam(static_cast<size_t>(T));
      a.dout = c.R.data();
      a.dq = dq.data();
      a.dk = dk.data();
      a.dv = dv.data();
      a.dq2 = dq2.data();
      a.dk2 = dk2.data();
      a.drow_tau = dtau.data();
      a.drow_lambda = dlam.data();
      ops.attention_backward(a);
      res[ns] = c.out;
      for (auto* x : {&dq, &dk, &dv, &dq2, &dk2, &dtau, &dlam})
        res[ns].insert(res[ns].end(), x->begin(), x->end());
    }
    INFO("math " << int(m) << ": skipped " << skipped[0] << " of " << total[0] << " tiles");
    CHECK(skipped[0] >= 2);  // key tile 1 against row blocks 1 and 2 (and 3 when T > 192)
    CHECK(skipped[1] == 0);
    CHECK(total[0] == total[1]);
    CHECK(res[0] == res[1]);  // bit-identical: a skipped tile only ever added exact zeros
  }
}

// configs/<scale>/<kind>.json is the user's one file per ablation. It sets `attention` alone on top
// of the scale's base.json, so a kind registered without config files (tested as base.json with
// attention.kind set, test_kinds.h) is tested at the same model, data and training settings.
TEST_CASE("attention: every per-kind config file is its scale's base with the kind's attention",
          "[attention]") {
  for (const std::string scale : {"tiny", "gpt2_162m"}) {
    const std::string dir = std::string(TDA_SOURCE_DIR) + "/configs/" + scale;
    int files = 0;
    for (const auto& kind : attention_kinds()) {
      const std::string path = dir + "/" + kind + ".json";
      INFO(path);
      const Config base = load_config(dir + "/base.json", {"attention.kind=" + kind});
      CHECK(base.model.head_dim() == 64);  // TRA/TDA thresholds assume d = 64
      auto v = make_attention(base.model, base.attention);
      CHECK(v->kind() == kind);
      if (!std::filesystem::exists(path)) continue;
      ++files;
      const Config c = load_config(path);
      CHECK(c.attention.kind == kind);
      json a = c.raw, b = base.raw;
      a.erase("attention");
      b.erase("attention");
      CHECK(a == b);
    }
    CHECK(files >= 11);  // the paper's eleven ship with a config at each scale
  }
}

}  // namespace tda
