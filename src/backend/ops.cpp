// The Ops defaults: the fused GELU and residual matmuls as their unfused parts, and plain host
// memory, so the CPU backend's buffers are ordinary arrays (no copies beyond what the caller asks
// for).
#include "backend/ops.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/device.h"
#include "core/config.h"
#include "core/error.h"

namespace tda {

void Ops::matmul_gelu_forward(float* y, float* pre, const float* x, const float* W, int N, int C,
                              int OC) {
  matmul_forward(pre, x, W, N, C, OC);
  gelu_forward(y, pre, size_t(N) * size_t(OC));
}

void Ops::matmul_residual_forward(float* y, const float* x, const float* W, int N, int C, int OC,
                                  const float* r) {
  matmul_forward(y, x, W, N, C, OC);
  add_inplace(y, r, size_t(N) * size_t(OC));
}

void Ops::matmul_backward_dgelu(float* dpre, float* dW, const float* dy, const float* x,
                                const float* W, const float* pre, int N, int C, int OC) {
  matmul_backward(dpre, dW, dy, x, W, N, C, OC, false);
  gelu_backward(dpre, pre, dpre, size_t(N) * size_t(C));
}

void Ops::adamw_clip_zero(float* p, float* g, float* m, float* v, size_t n, float lr, float beta1,
                          float beta2, float eps, float wd, int t, float grad_scale) {
  if (grad_scale != 1.f) scale(g, n, grad_scale);
  adamw(p, g, m, v, n, lr, beta1, beta2, eps, wd, t);
  zero(g, n);
}

void* Ops::alloc_bytes(size_t bytes, const std::string& what) {
  constexpr size_t kAlign = 64;  // a cache line; AVX-512 loads never straddle two
  const size_t rounded = (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded);
  TDA_CHECK(p, std::string(name()) + ": out of host memory: " + what + " needs " +
                   std::to_string(bytes) + " bytes");
  return p;
}

void Ops::free_bytes(void* p) {
  std::free(p);
}

void Ops::upload(void* dst, const void* host_src, size_t bytes) {
  if (bytes) std::memcpy(dst, host_src, bytes);
}
void Ops::download(void* host_dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(host_dst, src, bytes);
}
void Ops::copy(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memmove(dst, src, bytes);
}

Device& Ops::device() {
  return host_device();
}

std::string Ops::set_attention_impl(const AttentionImplRequest& r) {
  check_attention_impl(r.impl);
  TDA_CHECK(r.impl != "cudnn", "attention.impl \"cudnn\": the " + std::string(name()) +
                                   " backend has no cuDNN attention (it needs --device cuda on a "
                                   "GPU build that found cuDNN: docs/cuda.md)");
  return "attention: our kernels (" + std::string(name()) + " backend)";
}

}  // namespace tda
