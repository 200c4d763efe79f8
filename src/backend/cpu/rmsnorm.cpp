// RMSNorm: y = w * x * rstd,  rstd = 1 / sqrt(mean(x^2) + eps)
// backward (h = w * dy):  dx = rstd * h - x * rstd^3 * mean(h * x);   dw += dy * x * rstd
// Row sums run in SIMD lanes (omp simd reductions: a fixed order for a given build).
#include <omp.h>

#include <cmath>
#include <vector>

#include "backend/cpu/cpu_ops.h"

namespace tda {

void CpuOps::rmsnorm_forward(float* y, float* rstd, const float* x, const float* w, int N, int C,
                             float eps) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* xr = x + size_t(n) * C;
    float* yr = y + size_t(n) * C;
    float ss = 0.f;
#pragma omp simd reduction(+ : ss)
    for (int c = 0; c < C; ++c) ss += xr[c] * xr[c];
    float r = 1.0f / std::sqrt(ss / C + eps);
    for (int c = 0; c < C; ++c) yr[c] = w[c] * xr[c] * r;
    rstd[n] = r;
  }
}

void CpuOps::rmsnorm_backward(float* dx, float* dw, const float* dy, const float* x, const float* w,
                              const float* rstd, int N, int C) {
  // dw is a reduction over rows: per-thread partials summed in thread order, so the result does
  // not depend on scheduling (bit-exact resume).
  int nt = omp_get_max_threads();
  std::vector<float> partial(size_t(nt) * C, 0.f);
#pragma omp parallel num_threads(nt)
  {
    float* dwp = partial.data() + size_t(omp_get_thread_num()) * C;
#pragma omp for schedule(static)
    for (int n = 0; n < N; ++n) {
      const float* xr = x + size_t(n) * C;
      const float* dyr = dy + size_t(n) * C;
      float* dxr = dx + size_t(n) * C;
      float r = rstd[n];
      float hx = 0.f;
#pragma omp simd reduction(+ : hx)
      for (int c = 0; c < C; ++c) hx += w[c] * dyr[c] * xr[c];
      float k = hx * r * r * r / C;
      for (int c = 0; c < C; ++c) {
        dxr[c] += w[c] * dyr[c] * r - xr[c] * k;
        dwp[c] += dyr[c] * xr[c] * r;
      }
    }
  }
  for (int t = 0; t < nt; ++t)
    for (int c = 0; c < C; ++c) dw[c] += partial[size_t(t) * C + c];
}

}  // namespace tda
