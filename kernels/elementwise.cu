// Pointwise kernels of the CUDA backend: GELU (tanh form, GPT-2), residual adds, scale, axpby,
// zero.
// Grid-stride loops, one element per thread per iteration; same float expressions as
// src/backend/cpu/elementwise.cpp.
#include "backend/cuda/common.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/kernel_helpers.cuh"

namespace tda::cuda {

namespace {
constexpr int kThreads = 256;
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)

// gelu(v) = 0.5 v (1 + tanh(u)),  u = c (v + 0.044715 v^3)
__device__ __forceinline__ float gelu(float v) {
  return 0.5f * v * (1.0f + tanhf(kGeluC * (v + 0.044715f * v * v * v)));
}

// gelu'(v) = 0.5 (1 + tanh u) + 0.5 v sech^2(u) c (1 + 3 * 0.044715 v^2)
__device__ __forceinline__ float gelu_slope(float v) {
  const float u = kGeluC * (v + 0.044715f * v * v * v);
  const float th = tanhf(u);
  const float sech2 = 1.0f - th * th;
  return 0.5f * (1.0f + th) + 0.5f * v * sech2 * kGeluC * (1.0f + 3.0f * 0.044715f * v * v);
}

__global__ void gelu_forward_kernel(float* y, const float* x, size_t n) {
  TDA_GRID_STRIDE(i, n) {
    y[i] = gelu(x[i]);
  }
}

// dx = gelu'(x) dy  (dx may alias dy: each element is read before it is written by the same
// thread)
__global__ void gelu_backward_kernel(float* dx, const float* x, const float* dy, size_t n) {
  TDA_GRID_STRIDE(i, n) {
    dx[i] = gelu_slope(x[i]) * dy[i];
  }
}

// bf16 storage of the MLP's activations: y = bf16(gelu(x)), x bf16 (widened exactly).
__global__ void gelu_forward_bf16_kernel(__nv_bfloat16* y, const __nv_bfloat16* x, size_t n) {
  TDA_GRID_STRIDE(i, n) {
    y[i] = __float2bfloat16(gelu(__bfloat162float(x[i])));
  }
}

// dx = bf16(gelu'(x) dy) with the pre-activation x stored in bf16, dy fp32: the fp32 kernel's
// value, rounded once (to nearest even, as cast_to_bf16 rounds a GEMM input).
__global__ void gelu_backward_bf16_kernel(__nv_bfloat16* dx, const __nv_bfloat16* x,
                                          const float* dy, size_t n) {
  TDA_GRID_STRIDE(i, n) {
    dx[i] = __float2bfloat16(gelu_slope(__bfloat162float(x[i])) * dy[i]);
  }
}

// y = a + b
__global__ void add_kernel(float* y, const float* a, const float* b, size_t n) {
  TDA_GRID_STRIDE(i, n) {
    y[i] = a[i] + b[i];
  }
}

// y += a
__global__ void add_inplace_kernel(float* y, const float* a, size_t n) {
  TDA_GRID_STRIDE(i, n) {
    y[i] += a[i];
  }
}

// x *= s
__global__ void scale_kernel(float* x, size_t n, float s) {
  TDA_GRID_STRIDE(i, n) {
    x[i] *= s;
  }
}

// y = a s x + b y (s: a device scalar, or null for 1);  b == 0: y = a s x without reading y
// (it may hold anything, as in BLAS)
__global__ void axpby_kernel(float* y, float a, const float* s, const float* x, float b, size_t n) {
  if (s) a *= *s;
  TDA_GRID_STRIDE(i, n) {
    y[i] = b == 0.0f ? a * x[i] : a * x[i] + b * y[i];
  }
}

// x = 0
__global__ void zero_kernel(float* x, size_t n) {
  TDA_GRID_STRIDE(i, n) {
    x[i] = 0.0f;
  }
}
}  // namespace

void gelu_forward(float* y, const float* x, size_t n) {
  if (n == 0) return;
  check(launch<gelu_forward_kernel>(dim3(grid_for(n, kThreads)), dim3(kThreads), 0, stream(), y, x,
                                    n),
        "gelu_forward");
}

void gelu_backward(float* dx, const float* x, const float* dy, size_t n) {
  if (n == 0) return;
  check(launch<gelu_backward_kernel>(dim3(grid_for(n, kThreads)), dim3(kThreads), 0, stream(), dx,
                                     x, dy, n),
        "gelu_backward");
}

void gelu_forward(__nv_bfloat16* y, const __nv_bfloat16* x, size_t n) {
  if (n == 0) return;
  check(launch<gelu_forward_bf16_kernel>(dim3(grid_for(n, kThreads)), dim3(kThreads), 0, stream(),
                                         y, x, n),
        "gelu_forward (bf16)");
}

void gelu_backward(__nv_bfloat16* dx, const __nv_bfloat16* x, const float* dy, size_t n) {
  if (n == 0) return;
  check(launch<gelu_backward_bf16_kernel>(dim3(grid_for(n, kThreads)), dim3(kThreads), 0, stream(),
                                          dx, x, dy, n),
        "gelu_backward (bf16)");
}

void add(float* y, const float* a, const float* b, size_t n) {
  if (n == 0) return;
  check(launch<add_kernel>(dim3(grid_for(n, kThreads)), dim3(kThreads), 0, stream(), y, a, b, n),
        "add");
}

void add_inplace(float* y, const float* a, size_t n) {
  if (n == 0) return;
  check(
      launch<add_inplace_kernel>(dim3(grid_for(n, kThreads)), dim3(kThreads), 0, stream(), y, a, n),
      "add_inplace");
}

void scale(float* x, size_t n, float s) {
  if (n == 0) return;
  check(launch<scale_kernel>(dim3(grid_for(n, kThreads)), dim3(kThreads), 0, stream(), x, n, s),
        "scale");
}

void axpby(float* y, float a, const float* x, float b, size_t n, const float* s) {
  if (n == 0) return;
  check(launch<axpby_kernel>(dim3(grid_for(n, kThreads)), dim3(kThreads), 0, stream(), y, a, s, x,
                             b, n),
        "axpby");
}

void zero(float* x, size_t n) {
  if (n == 0) return;
  check(launch<zero_kernel>(dim3(grid_for(n, kThreads)), dim3(kThreads), 0, stream(), x, n),
        "zero");
}

}  // namespace tda::cuda
