// Central finite differences against an analytic gradient.
//
// We check directional derivatives: for a random direction u, (f(x+hu) - f(x-hu)) / 2h must
// equal <grad, u>. A direction touches every entry at once, so a dropped term anywhere in a
// backward shows up, and the value is large enough to rise above fp32 rounding noise.
#pragma once
#include <cmath>
#include <functional>
#include <vector>

#include "core/rng.h"

namespace tda {

struct FdResult {
  double numeric, analytic, rel_err;
};

// f: evaluates the scalar loss (in double) at the current contents of x.
inline FdResult fd_directional(float* x, size_t n, const float* grad,
                               const std::function<double()>& f, uint64_t seed, double h = 1e-3) {
  Rng rng(seed);
  std::vector<float> u(n), x0(x, x + n);
  double analytic = 0.0;
  for (size_t i = 0; i < n; ++i) {
    u[i] = rng.normal();
    analytic += double(grad[i]) * u[i];
  }
  for (size_t i = 0; i < n; ++i) x[i] = x0[i] + float(h) * u[i];
  double fp = f();
  for (size_t i = 0; i < n; ++i) x[i] = x0[i] - float(h) * u[i];
  double fm = f();
  for (size_t i = 0; i < n; ++i) x[i] = x0[i];
  double numeric = (fp - fm) / (2 * h);
  double denom = std::max(std::fabs(numeric), std::fabs(analytic));
  return {numeric, analytic, denom > 0 ? std::fabs(numeric - analytic) / denom : 0.0};
}

inline std::vector<float> random_vec(size_t n, uint64_t seed, float scale = 1.f) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = scale * rng.normal();
  return v;
}

inline double dot_d(const float* a, const float* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += double(a[i]) * b[i];
  return s;
}

}  // namespace tda
