// The TDA paper's two survivor theorems, measured with the real CPU kernels on random unit
// vectors (d = 64, beta = 1, kappa = 1, tau_i = sqrt(2 log(i+1) / d)):
//   TRA: E[#{j <= i : s_ij > tau_i}] <= kappa for every row i;
//   TDA: E[#{j <= i : s1_ij > tau_i and s2_ij > tau_i}] <= kappa^2 / (i+1).
// Besides the bounds, the counts are compared with their exact expectations: for independent
// uniform unit vectors the cosine has density ~ (1 - x^2)^((d-3)/2), so with P_i = P(cos > tau_i)
// a TRA row expects (i+1) P_i survivors and a TDA row (i+1) P_i^2 consensus survivors. Each row
// count is a sum of independent Bernoullis (variance <= mean), so a bin total is compared with
// its expectation at 4 standard deviations (+1 for tiny counts); the seed is fixed.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "attention/common.h"
#include "test_attention_util.h"

namespace tda {

namespace {

// P_i = P(cos > tau_i) for independent uniform unit vectors in R^d, for every row i
// (Simpson on 2000 intervals of a smooth integrand: relative error far below the 4-sigma test).
std::vector<double> cos_tails(const std::vector<float>& tau, int d) {
  auto f = [d](double x) { return std::pow(std::max(0.0, 1 - x * x), 0.5 * (d - 3)); };
  auto integ = [&](double a, double b) {
    const int n = 2000;
    const double h = (b - a) / n;
    double s = f(a) + f(b);
    for (int i = 1; i < n; ++i) s += f(a + i * h) * (i % 2 ? 4 : 2);
    return s * h / 3;
  };
  const double z = integ(-1.0, 1.0);
  std::vector<double> p(tau.size());
  for (size_t i = 0; i < tau.size(); ++i) p[i] = integ(tau[i], 1.0) / z;
  return p;
}

struct Run {
  std::vector<float> surv;  // (H, T, ns)
  std::vector<float> tau;
};

Run run_survivors(AttnMath m, int H, int T, int d, uint64_t seed) {
  CpuOps ops;
  Rng rng(seed);
  const size_t rows = size_t(H) * T;
  std::vector<float> q = unit_vectors(rows, d, rng), k = unit_vectors(rows, d, rng);
  std::vector<float> q2, k2;
  const bool two = m == AttnMath::kDiffThreshold;
  if (two) {
    q2 = unit_vectors(rows, d, rng);
    k2 = unit_vectors(rows, d, rng);
  }
  std::vector<float> v(rows * d, 0.f), out(rows * d);
  Run r;
  r.tau.resize(size_t(T));
  attn_util::threshold_c(r.tau.data(), T, 1.0, d);  // beta = 1, kappa = 1
  r.surv.resize(rows * (two ? 3 : 1));
  AttnArgs a = theorem_args(m, H, T, d, q.data(), k.data(), two ? q2.data() : nullptr,
                            two ? k2.data() : nullptr);
  a.v = v.data();
  a.out = out.data();
  a.tau = r.tau.data();
  a.survivors = r.surv.data();
  ops.attention_forward(a);
  return r;
}

bool verbose() {
  return std::getenv("TDA_TEST_VERBOSE") != nullptr;
}

}  // namespace

TEST_CASE("attention theorem: TRA keeps <= kappa spurious survivors per row up to i = 4095",
          "[attention]") {
  const int H = 4, T = 4096, d = 64;
  Run r = run_survivors(AttnMath::kThreshold, H, T, d, 2024);
  const std::vector<double> P = cos_tails(r.tau, d);
  if (verbose())
    std::printf("TRA  rows i in [lo, hi]   mean survivors   exact E   bound kappa=1\n");
  for (int lo = 0; lo < T; lo = 2 * lo + 1) {
    const int hi = std::min(T - 1, 2 * lo);  // bins [0,0], [1,2], [3,6], ..., [2047, 4094], [4095]
    double obs = 0, expct = 0;
    int nrows = 0;
    for (int h = 0; h < H; ++h)
      for (int i = lo; i <= hi; ++i) {
        obs += r.surv[size_t(h) * T + i];
        expct += (i + 1) * P[size_t(i)];
        ++nrows;
      }
    const double mean = obs / nrows;
    if (verbose())
      std::printf("TRA  [%4d, %4d]            %.4f           %.4f    1\n", lo, hi, mean,
                  expct / nrows);
    INFO("rows [" << lo << ", " << hi << "]: mean " << mean << ", exact " << expct / nrows);
    CHECK(mean <= 1.0);                                         // the theorem (kappa = 1)
    CHECK(std::fabs(obs - expct) <= 4 * std::sqrt(expct) + 1);  // and the exact expectation
    if (hi == T - 1) break;
  }
}

TEST_CASE("attention theorem: TDA consensus survivors track kappa^2/(i+1)", "[attention]") {
  const int H = 256, T = 256, d = 64;  // many short sequences: enough rows per small-i bin
  Run r = run_survivors(AttnMath::kDiffThreshold, H, T, d, 7);
  const std::vector<double> P = cos_tails(r.tau, d);
  if (verbose())
    std::printf(
        "TDA  rows i in [lo, hi]   consensus/row   exact E     kappa^2/(i+1)   "
        "view1/row\n");
  for (int lo = 0; lo < T; lo = 2 * lo + 1) {
    const int hi = std::min(T - 1, 2 * lo);
    double obs = 0, expct = 0, bound = 0, v1 = 0;
    int nrows = 0;
    for (int h = 0; h < H; ++h)
      for (int i = lo; i <= hi; ++i) {
        const size_t row = size_t(h) * T + i;
        obs += r.surv[row * 3 + 2];
        v1 += r.surv[row * 3];
        const double p = P[size_t(i)];
        expct += (i + 1) * p * p;
        bound += 1.0 / (i + 1);
        ++nrows;
      }
    if (verbose())
      std::printf("TDA  [%4d, %4d]            %.5f         %.5f     %.5f         %.4f\n", lo, hi,
                  obs / nrows, expct / nrows, bound / nrows, v1 / nrows);
    INFO("rows [" << lo << ", " << hi << "]: consensus " << obs << ", exact " << expct << ", bound "
                  << bound);
    CHECK(expct <= bound);                                      // the theorem, exactly
    CHECK(obs <= bound + 4 * std::sqrt(bound) + 1);             // measured against the bound
    CHECK(std::fabs(obs - expct) <= 4 * std::sqrt(expct) + 1);  // and against the expectation
    if (hi == T - 1) break;
  }
}

}  // namespace tda
