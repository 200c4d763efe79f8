// The attention variants' small parameters on the device (ops.h: clamp_affine, diff_lambda,
// position_scales), with the math of attention/policies.h that the CPU backend
// (src/backend/cpu/variant_scalars.cpp) runs too: TDA's clamped lambda, dex's annealed lambda, the
// Diff lambda and its backward, ssmax's and lssa's length factors. They replace host reads of the
// parameters (a download per layer and micro-step, each a sync point on a GPU) by kernels whose
// outputs the attention kernels and axpby read as device scalars.
#include "attention/policies.h"
#include "backend/cuda/common.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/kernel_helpers.cuh"

namespace tda::cuda {

namespace {
constexpr int kThreads = 128;

__global__ void clamp_affine_kernel(float* out, const float* x, float a, float b, float lo,
                                    float hi) {
  bool inside = false;
  out[0] = attn::clamp_affine(*x, a, b, lo, hi, &inside);
  out[1] = inside ? 1.f : 0.f;
}

// One thread: the dot products of d (<= a few hundred) floats in the CPU's order.
__global__ void diff_lambda_kernel(float* out, const float* lq1, const float* lk1, const float* lq2,
                                   const float* lk2, int d, float init) {
  const float e1 = attn::exp_dot(lq1, lk1, d), e2 = attn::exp_dot(lq2, lk2, d);
  out[0] = e1;
  out[1] = e2;
  out[2] = e1 - e2 + init;
}

// One thread per component: y = c x + 1 y, as axpby with the coefficient c = dl e1 or -dl e2.
__global__ void diff_lambda_backward_kernel(float* dlq1, float* dlk1, float* dlq2, float* dlk2,
                                            const float* lq1, const float* lk1, const float* lq2,
                                            const float* lk2, const float* e, const float* dl_sum,
                                            int d) {
  const float c1 = *dl_sum * e[0], c2 = -*dl_sum * e[1];
  TDA_GRID_STRIDE(i, size_t(d)) {
    dlq1[i] = c1 * lk1[i] + 1.f * dlq1[i];
    dlk1[i] = c1 * lq1[i] + 1.f * dlk1[i];
    dlq2[i] = c2 * lk2[i] + 1.f * dlq2[i];
    dlk2[i] = c2 * lq2[i] + 1.f * dlk2[i];
  }
}

__global__ void position_scales_kernel(float* f, const float* s, const float* b, float div, int H,
                                       int T) {
  TDA_GRID_STRIDE(k, size_t(H) * T) {
    const int h = int(k / size_t(T)), i = int(k % size_t(T));
    f[k] = attn::position_scale(i, s ? s[h] : 1.f, b ? b[h] : 0.f, div);
  }
}
}  // namespace

void clamp_affine(float* out, const float* x, float a, float b, float lo, float hi) {
  check(launch<clamp_affine_kernel>(dim3(1), dim3(1), 0, stream(), out, x, a, b, lo, hi),
        "clamp_affine");
}

void diff_lambda(float* out, const float* lq1, const float* lk1, const float* lq2, const float* lk2,
                 int d, float init) {
  check(launch<diff_lambda_kernel>(dim3(1), dim3(1), 0, stream(), out, lq1, lk1, lq2, lk2, d, init),
        "diff_lambda");
}

void diff_lambda_backward(float* dlq1, float* dlk1, float* dlq2, float* dlk2, const float* lq1,
                          const float* lk1, const float* lq2, const float* lk2, const float* e,
                          const float* dl_sum, int d) {
  if (d <= 0) return;
  check(launch<diff_lambda_backward_kernel>(dim3(grid_for(size_t(d), kThreads)), dim3(kThreads), 0,
                                            stream(), dlq1, dlk1, dlq2, dlk2, lq1, lk1, lq2, lk2, e,
                                            dl_sum, d),
        "diff_lambda_backward");
}

void position_scales(float* f, const float* s, const float* b, float div, int H, int T) {
  const size_t n = size_t(H) * size_t(T);
  if (n == 0) return;
  check(launch<position_scales_kernel>(dim3(grid_for(n, kThreads)), dim3(kThreads), 0, stream(), f,
                                       s, b, div, H, T),
        "position_scales");
}

}  // namespace tda::cuda
