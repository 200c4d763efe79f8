// Fused LM head + cross-entropy over the real vocabulary, chunked over rows so no (N, V) logits
// buffer exists (as src/backend/cpu/lm_head.cpp). Per chunk of kLmHeadChunkRows rows:
//   logits = x W^T                                   (tda::cuda::gemm, fp32 out)
//   m = max_{v<V_real} l_v;  S = sum_{v<V_real} exp(l_v - m);  loss = m + log S - l_target
//   dlogits_v = grad_scale (exp(l_v - m)/S - [v == target]),  0 for padded v >= V_real
//   target kIgnoreTarget (backend/ops.h): loss 0 and dlogits 0 on the row
//   dx = dlogits W;  dW += dlogits^T x                (tda::cuda::gemm, fp32 accumulation)
// One block per row, two passes over it (llm.c's fused classifier): the first finds m and S at
// once, each thread keeping a running max and a sum rescaled when the max moves (online
// softmax), merged over the block as (M, sum_t S_t exp(m_t - M)); the second writes dlogits.
// The row is 201 KB at the d12 vocabulary, so each pass is a DRAM read (a chunk of 1024 rows is
// 206 MB): a separate max pass, as before, read every row three times. The reductions run in a
// fixed order. The bf16 path
// (Bf16Operands) feeds the three GEMMs bf16 x, W and dlogits (the softmax kernel writes the
// bf16 dlogits itself, no extra pass); logits, the loss and dx/dW stay fp32. Chunks of 1024
// rows keep W's re-reads (one per chunk and GEMM) small next to the GEMMs at N = 16k.
#include "backend/cuda/common.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/kernel_helpers.cuh"

namespace tda::cuda {

namespace {
constexpr int kThreads = 256;

__global__ void softmax_xent_kernel(float* logits, __nv_bfloat16* dlogits_bf16, float* losses,
                                    const int32_t* targets, int V_padded, int V_real,
                                    float grad_scale, bool grad) {
  __shared__ float smem[32];
  float* l = logits + size_t(blockIdx.x) * V_padded;
  const int tgt = targets[blockIdx.x];
  __nv_bfloat16* lb = dlogits_bf16 ? dlogits_bf16 + size_t(blockIdx.x) * V_padded : nullptr;
  if (tgt == kIgnoreTarget) {  // a target that does not count (the whole block branches alike)
    if (threadIdx.x == 0) losses[blockIdx.x] = 0.0f;
    if (!grad) return;
    for (int v = threadIdx.x; v < V_padded; v += blockDim.x) {
      if (lb)
        lb[v] = __float2bfloat16(0.0f);
      else
        l[v] = 0.0f;
    }
    return;
  }
  const float target_logit = l[tgt];   // read before any thread overwrites the row
  float tmx = -INFINITY, tsum = 0.0f;  // this thread's running max and sum of exp(l - tmx)
  for (int v = threadIdx.x; v < V_real; v += blockDim.x) {
    const float x = l[v];
    if (x > tmx) {
      tsum = tsum * expf(tmx - x) + 1.0f;  // exp(-inf) = 0 before the first element
      tmx = x;
    } else {
      tsum += expf(x - tmx);
    }
  }
  const float mx = block_max(tmx, smem);
  // a thread that saw no element has tsum = 0 (and tmx = -inf: exp(-inf) = 0)
  const float sum = block_sum(tsum > 0.0f ? tsum * expf(tmx - mx) : 0.0f, smem);
  // block_sum ends with a barrier: every thread has read target_logit
  if (threadIdx.x == 0) losses[blockIdx.x] = mx + logf(sum) - target_logit;
  if (!grad) return;
  const float k = grad_scale / sum;
  for (int v = threadIdx.x; v < V_padded; v += blockDim.x) {
    float g = v < V_real ? expf(l[v] - mx) * k : 0.0f;
    if (v == tgt) g -= grad_scale;
    if (lb)
      lb[v] = __float2bfloat16(g);
    else
      l[v] = g;
  }
}
}  // namespace

size_t lm_head_scratch(int N, int V_padded) {
  return size_t(N < kLmHeadChunkRows ? N : kLmHeadChunkRows) * size_t(V_padded);
}

void lm_head_loss(float* losses, float* dx, float* dW, const float* x, const float* W,
                  const int32_t* targets, int N, int C, int V_padded, int V_real, float grad_scale,
                  float* scratch, const Bf16Operands* bf) {
  for (int n0 = 0; n0 < N; n0 += kLmHeadChunkRows) {
    const int rows = N - n0 < kLmHeadChunkRows ? N - n0 : kLmHeadChunkRows;
    if (bf)
      gemm(false, true, rows, V_padded, C, 1.0f, bf->x + size_t(n0) * C, C, bf->W, C, 0.0f, scratch,
           V_padded);
    else
      gemm(false, true, rows, V_padded, C, 1.0f, x + size_t(n0) * C, C, W, C, 0.0f, scratch,
           V_padded);
    check(launch<softmax_xent_kernel>(dim3(unsigned(rows)), dim3(kThreads), 0, stream(), scratch,
                                      dx && bf ? bf->dlogits : nullptr, losses + n0, targets + n0,
                                      V_padded, V_real, grad_scale, dx != nullptr),
          "softmax_xent");
    if (!dx) continue;
    float* dxc = dx + size_t(n0) * C;
    if (bf) {
      gemm(false, false, rows, C, V_padded, 1.0f, bf->dlogits, V_padded, bf->W, C, 0.0f, dxc, C);
      gemm(true, false, V_padded, C, rows, 1.0f, bf->dlogits, V_padded, bf->x + size_t(n0) * C, C,
           1.0f, dW, C);
    } else {
      gemm(false, false, rows, C, V_padded, 1.0f, scratch, V_padded, W, C, 0.0f, dxc, C);
      gemm(true, false, V_padded, C, rows, 1.0f, scratch, V_padded, x + size_t(n0) * C, C, 1.0f, dW,
           C);
    }
  }
}

}  // namespace tda::cuda
