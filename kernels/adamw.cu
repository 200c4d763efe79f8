// AdamW (Loshchilov & Hutter), one thread per parameter, as src/backend/cpu/optimizer.cpp:
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p -= lr * ( m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) + wd * p )
// The bias corrections bc1 = 1-b1^t, bc2 = 1-b2^t are computed once on the host (float pow,
// as the CPU backend) and passed in.
#include <cmath>

#include "backend/cuda/common.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/kernel_helpers.cuh"

namespace tda::cuda {

namespace {
constexpr int kThreads = 256;

__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, size_t n, float lr,
                             float beta1, float beta2, float eps, float wd, float bc1, float bc2) {
  TDA_GRID_STRIDE(i, n) {
    const float gi = g[i];
    const float mi = beta1 * m[i] + (1.0f - beta1) * gi;
    const float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= lr * ((mi / bc1) / (sqrtf(vi / bc2) + eps) + wd * p[i]);
  }
}

// adamw_clip_zero: the same update on g * grad_scale (what scale() then adamw_kernel compute, bit
// for bit), then g = 0: one pass over p, g, m, v (read 4, write 4 floats per parameter) where the
// three kernels made three (read 7, write 5) and three launches per tensor.
__global__ void adamw_clip_zero_kernel(float* p, float* g, float* m, float* v, size_t n, float lr,
                                       float beta1, float beta2, float eps, float wd, float bc1,
                                       float bc2, float grad_scale) {
  TDA_GRID_STRIDE(i, n) {
    const float gi = g[i] * grad_scale;
    const float mi = beta1 * m[i] + (1.0f - beta1) * gi;
    const float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= lr * ((mi / bc1) / (sqrtf(vi / bc2) + eps) + wd * p[i]);
    g[i] = 0.f;
  }
}
}  // namespace

void adamw_clip_zero(float* p, float* g, float* m, float* v, size_t n, float lr, float beta1,
                     float beta2, float eps, float wd, int t, float grad_scale) {
  if (n == 0) return;
  const float bc1 = 1.0f - std::pow(beta1, float(t));
  const float bc2 = 1.0f - std::pow(beta2, float(t));
  check(launch<adamw_clip_zero_kernel>(dim3(grid_for(n, kThreads)), dim3(kThreads), 0, stream(),
                                       p, g, m, v, n, lr, beta1, beta2, eps, wd, bc1, bc2,
                                       grad_scale),
        "adamw_clip_zero");
}

void adamw(float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1,
           float beta2, float eps, float wd, int t) {
  if (n == 0) return;
  const float bc1 = 1.0f - std::pow(beta1, float(t));
  const float bc2 = 1.0f - std::pow(beta2, float(t));
  check(launch<adamw_kernel>(dim3(grid_for(n, kThreads)), dim3(kThreads), 0, stream(), p, g, m, v,
                             n, lr, beta1, beta2, eps, wd, bc1, bc2),
        "adamw");
}

}  // namespace tda::cuda
