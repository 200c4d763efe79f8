#include "attention/common.h"

#include <algorithm>

namespace tda {
namespace attn_util {

void l2norm_forward(float* x, float* norm, size_t N, int D) {
#pragma omp parallel for schedule(static)
  for (size_t n = 0; n < N; ++n) {
    float* r = x + n * D;
    float ss = 0.f;
    for (int d = 0; d < D; ++d) ss += r[d] * r[d];
    const float nrm = std::sqrt(ss);
    const float inv = 1.f / std::max(nrm, 1e-12f);
    for (int d = 0; d < D; ++d) r[d] *= inv;
    norm[n] = nrm;
  }
}

void l2norm_backward(float* dx, const float* xhat, const float* norm, size_t N, int D) {
#pragma omp parallel for schedule(static)
  for (size_t n = 0; n < N; ++n) {
    float* g = dx + n * D;
    const float* xh = xhat + n * D;
    if (norm[n] > 1e-12f) {
      // the clamp max(|x|, eps) is inactive: project out the radial direction
      float p = 0.f;
      for (int d = 0; d < D; ++d) p += xh[d] * g[d];
      const float inv = 1.f / norm[n];
      for (int d = 0; d < D; ++d) g[d] = (g[d] - xh[d] * p) * inv;
    } else {
      for (int d = 0; d < D; ++d) g[d] *= 1e12f;  // x~ = x / 1e-12 is linear
    }
  }
}

void threshold_c(float* c, int T, double kappa, int d) {
  for (int i = 0; i < T; ++i) {
    // max(0, .) guards kappa > 1 (the released code hard-wires kappa = 1)
    const double l = std::max(0.0, std::log(double(i + 1) / kappa));
    c[i] = float(std::sqrt(2.0 * l / d));
  }
}

double serial_sum(const float* x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += x[i];
  return s;
}

double weighted_row_sum(const float* x, const float* w, int BH, int T) {
  double s = 0;
  for (int bh = 0; bh < BH; ++bh)
    for (int t = 0; t < T; ++t) s += double(w[t]) * x[size_t(bh) * T + t];
  return s;
}

}  // namespace attn_util
}  // namespace tda
