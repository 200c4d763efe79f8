// AdamW (Loshchilov & Hutter): decoupled weight decay, bias-corrected moments.
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p -= lr * ( m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) + wd * p )
// The loops vectorise: this file is built with -fno-math-errno (CMakeLists.txt), without which
// GCC keeps sqrt a scalar call that may set errno.
#include <omp.h>

#include <cmath>
#include <vector>

#include "backend/cpu/cpu_ops.h"

namespace tda {

namespace {
struct AdamConsts {
  float lr, beta1, beta2, eps, wd, bc1, bc2;
};

AdamConsts adam_consts(float lr, float beta1, float beta2, float eps, float wd, int t) {
  return {lr,
          beta1,
          beta2,
          eps,
          wd,
          1.0f - std::pow(beta1, float(t)),
          1.0f - std::pow(beta2, float(t))};
}

// One element; adamw and adamw_clip_zero share it, so both give the same bits.
inline void adam_update(float& p, float g, float& m, float& v, const AdamConsts& k) {
  const float mi = k.beta1 * m + (1.0f - k.beta1) * g;
  const float vi = k.beta2 * v + (1.0f - k.beta2) * g * g;
  m = mi;
  v = vi;
  p -= k.lr * ((mi / k.bc1) / (std::sqrt(vi / k.bc2) + k.eps) + k.wd * p);
}
}  // namespace

void CpuOps::adamw(float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1,
                   float beta2, float eps, float wd, int t) {
  const AdamConsts k = adam_consts(lr, beta1, beta2, eps, wd, t);
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) adam_update(p[i], g[i], m[i], v[i], k);
}

// The same update on g * grad_scale (what scale() then adamw() computes, bit for bit), with the
// gradient zeroed once read: one pass over p, g, m, v instead of three (scale, adamw, zero_grad).
void CpuOps::adamw_clip_zero(float* p, float* g, float* m, float* v, size_t n, float lr,
                             float beta1, float beta2, float eps, float wd, int t,
                             float grad_scale) {
  const AdamConsts k = adam_consts(lr, beta1, beta2, eps, wd, t);
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) {
    adam_update(p[i], g[i] * grad_scale, m[i], v[i], k);
    g[i] = 0.f;
  }
}

// Fixed-order reduction: per-thread partials over contiguous chunks (each summed in SIMD lanes,
// then across them, in a fixed order), summed in thread order, so the grad norm (and hence
// clipping) is reproducible run to run with the same thread count.
double CpuOps::sum_squares(const float* x, size_t n) {
  int nt = omp_get_max_threads();
  std::vector<double> partial(size_t(nt), 0.0);
#pragma omp parallel num_threads(nt)
  {
    const size_t t = size_t(omp_get_thread_num()), team = size_t(omp_get_num_threads());
    const size_t lo = n * t / team, hi = n * (t + 1) / team;
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (size_t i = lo; i < hi; ++i) s += double(x[i]) * double(x[i]);
    partial[t] = s;
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace tda
