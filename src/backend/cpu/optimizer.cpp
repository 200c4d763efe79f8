// AdamW (Loshchilov & Hutter): decoupled weight decay, bias-corrected moments.
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p -= lr * ( m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) + wd * p )
#include <cmath>
#include <vector>

#include <omp.h>

#include "backend/cpu/cpu_ops.h"

namespace tda {

void CpuOps::adamw(float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1,
                   float beta2, float eps, float wd, int t) {
  const float bc1 = 1.0f - std::pow(beta1, float(t));
  const float bc2 = 1.0f - std::pow(beta2, float(t));
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    float mi = beta1 * m[i] + (1.0f - beta1) * g[i];
    float vi = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
    m[i] = mi;
    v[i] = vi;
    p[i] -= lr * ((mi / bc1) / (std::sqrt(vi / bc2) + eps) + wd * p[i]);
  }
}

// Fixed-order reduction: per-thread partials over static chunks, summed in thread order, so the
// grad norm (and hence clipping) is reproducible run to run.
double CpuOps::sum_squares(const float* x, size_t n) {
  int nt = omp_get_max_threads();
  std::vector<double> partial(size_t(nt), 0.0);
#pragma omp parallel num_threads(nt)
  {
    double s = 0.0;
#pragma omp for schedule(static)
    for (size_t i = 0; i < n; ++i) s += double(x[i]) * double(x[i]);
    partial[size_t(omp_get_thread_num())] = s;
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace tda
