// Fused LM head + cross-entropy, chunked over rows so no (N, V) logits buffer exists.
//   logits = x W^T;  p = softmax(logits[:V_real]);  loss_n = logsumexp - logits[target]
//   dlogits = grad_scale * (p - onehot(target)), 0 on padded columns
//   a target kIgnoreTarget: loss 0 and dlogits 0 on its row (ops.h)
//   dx = dlogits W;  dW += dlogits^T x
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/fast_exp.h"

namespace tda {

namespace {
// 256 rows: 51 MB of logits at vocabulary 50304, past the L3 cache. Chunks that fit it (64 rows,
// 13 MB) keep the softmax passes in cache but make the three GEMMs smaller, and measured slower
// per training step, tiny and d12 (docs/perf.md, CPU).
constexpr int kChunkRows = 256;
}  // namespace

void CpuOps::lm_head_loss(float* losses, float* dx, float* dW, const float* x, const float* W,
                          const int32_t* targets, int N, int C, int V_padded, int V_real,
                          float grad_scale) {
  // Reused across calls: a fresh 50 MB buffer per call costs more in page faults than the
  // softmax itself.
  static thread_local std::vector<float> logits;
  const size_t need = size_t(std::min(N, kChunkRows)) * V_padded;
  if (logits.size() < need) logits.resize(need);
  float* const buf = logits.data();  // thread_local: OpenMP workers must use this thread's copy
  for (int n0 = 0; n0 < N; n0 += kChunkRows) {
    int rows = std::min(kChunkRows, N - n0);
    const float* xc = x + size_t(n0) * C;
    cpu_sgemm(false, true, rows, V_padded, C, 1.0f, xc, C, W, C, 0.0f, buf, V_padded);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; ++r) {
      float* l = buf + size_t(r) * V_padded;
      const int tgt = targets[n0 + r];
      if (tgt == kIgnoreTarget) {  // a target that does not count: no loss, no gradient
        losses[n0 + r] = 0.0f;
        if (dx) std::fill(l, l + V_padded, 0.0f);
        continue;
      }
      float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
      for (int v = 0; v < V_real; ++v) mx = l[v] > mx ? l[v] : mx;
      const float target_logit = l[tgt];
      // One exponential per logit, kept in place for the gradient.
      float sum = 0.f;
#pragma omp simd reduction(+ : sum)
      for (int v = 0; v < V_real; ++v) {
        const float e = fast_expf(l[v] - mx);
        l[v] = e;
        sum += e;
      }
      losses[n0 + r] = mx + std::log(sum) - target_logit;
      if (dx) {
        const float k = grad_scale / sum;
#pragma omp simd
        for (int v = 0; v < V_real; ++v) l[v] *= k;
        for (int v = V_real; v < V_padded; ++v) l[v] = 0.0f;
        l[tgt] -= grad_scale;
      }
    }
    if (dx) {
      cpu_sgemm(false, false, rows, C, V_padded, 1.0f, buf, V_padded, W, C, 0.0f,
                dx + size_t(n0) * C, C);
      cpu_sgemm(true, false, V_padded, C, rows, 1.0f, buf, V_padded, xc, C, 1.0f, dW, C);
    }
  }
}

void CpuOps::lm_head_logits(float* logits, const float* x, const float* W, int C, int V) {
  cblas_sgemv(CblasRowMajor, CblasNoTrans, V, C, 1.0f, W, C, x, 1, 0.0f, logits, 1);
}

}  // namespace tda
