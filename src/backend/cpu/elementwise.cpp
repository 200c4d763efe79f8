// Pointwise ops: GELU (tanh form, as GPT-2), residual adds, scaling, zeroing.
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/fast_exp.h"

namespace tda {

namespace {
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)

// tanh(u) = 1 - 2 / (exp(2u) + 1) on fast_expf, so that the GELU loops vectorise (libm's tanhf
// is a call per element). Absolute error about 1e-7, float's own resolution near |tanh| = 1;
// the saturated ends come out as exactly +-1 (fast_expf clamps), NaN as -1 (x carries it on).
inline float tanh_fast(float u) {
  return 1.0f - 2.0f / (fast_expf(2.0f * u) + 1.0f);
}
}  // namespace

// y = 0.5 x (1 + tanh(u)),  u = c (x + 0.044715 x^3)
void CpuOps::gelu_forward(float* y, const float* x, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) {
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanh_fast(kGeluC * (v + 0.044715f * v * v * v)));
  }
}

// dy/dx = 0.5 (1 + tanh u) + 0.5 x sech^2(u) c (1 + 3 * 0.044715 x^2)
void CpuOps::gelu_backward(float* dx, const float* x, const float* dy, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) {
    float v = x[i];
    float u = kGeluC * (v + 0.044715f * v * v * v);
    float th = tanh_fast(u);
    float sech2 = 1.0f - th * th;
    float g = 0.5f * (1.0f + th) + 0.5f * v * sech2 * kGeluC * (1.0f + 3.0f * 0.044715f * v * v);
    dx[i] = g * dy[i];
  }
}

void CpuOps::add(float* y, const float* a, const float* b, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void CpuOps::add_inplace(float* y, const float* a, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) y[i] += a[i];
}

void CpuOps::scale(float* x, size_t n, float s) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) x[i] *= s;
}

// y = a x + b y (b == 0: y is not read)
void CpuOps::axpby(float* y, float a, const float* x, float b, size_t n, const float* s) {
  if (s) a *= *s;
  if (b == 0.f) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) y[i] = a * x[i];
  } else {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) y[i] = a * x[i] + b * y[i];
  }
}

void CpuOps::zero(float* x, size_t n) {
  std::memset(x, 0, n * sizeof(float));
}

}  // namespace tda
