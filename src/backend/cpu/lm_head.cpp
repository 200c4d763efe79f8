// Fused LM head + cross-entropy, chunked over rows so no (N, V) logits buffer exists.
//   logits = x W^T;  p = softmax(logits[:V_real]);  loss_n = logsumexp - logits[target]
//   dlogits = grad_scale * (p - onehot(target)), 0 on padded columns
//   dx = dlogits W;  dW += dlogits^T x
#include <cblas.h>

#include <cmath>
#include <vector>

#include "backend/cpu/cpu_ops.h"

namespace tda {

namespace {
constexpr int kChunkRows = 256;
}

void CpuOps::lm_head_loss(float* losses, float* dx, float* dW, const float* x, const float* W,
                          const int32_t* targets, int N, int C, int V_padded, int V_real,
                          float grad_scale) {
  std::vector<float> logits(size_t(std::min(N, kChunkRows)) * V_padded);
  for (int n0 = 0; n0 < N; n0 += kChunkRows) {
    int rows = std::min(kChunkRows, N - n0);
    const float* xc = x + size_t(n0) * C;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, V_padded, C, 1.0f, xc, C, W, C, 0.0f,
                logits.data(), V_padded);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; ++r) {
      float* l = logits.data() + size_t(r) * V_padded;
      float mx = -INFINITY;
      for (int v = 0; v < V_real; ++v) mx = std::max(mx, l[v]);
      double sum = 0.0;
      for (int v = 0; v < V_real; ++v) sum += std::exp(double(l[v] - mx));
      float lse = mx + float(std::log(sum));
      int tgt = targets[n0 + r];
      losses[n0 + r] = lse - l[tgt];
      if (dx) {
        for (int v = 0; v < V_real; ++v) l[v] = grad_scale * std::exp(l[v] - lse);
        for (int v = V_real; v < V_padded; ++v) l[v] = 0.0f;
        l[tgt] -= grad_scale;
      }
    }
    if (dx) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, C, V_padded, 1.0f, logits.data(),
                  V_padded, W, C, 0.0f, dx + size_t(n0) * C, C);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, V_padded, C, rows, 1.0f, logits.data(),
                  V_padded, xc, C, 1.0f, dW, C);
    }
  }
}

void CpuOps::lm_head_logits(float* logits, const float* x, const float* W, int C, int V) {
  cblas_sgemv(CblasRowMajor, CblasNoTrans, V, C, 1.0f, W, C, x, 1, 0.0f, logits, 1);
}

}  // namespace tda
