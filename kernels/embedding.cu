// Token embedding, as src/backend/cpu/embedding.cpp:
//   forward:  y(n, c) = wte(token_n, c)
//   backward: dwte(v, c) += dy(n, c) over the rows n with token v, in increasing n: the CPU
//             backend's order, so the result is deterministic (no atomics) and bit-identical.
// Backward: the rows grouped by token (backend/embedding_plan.h, built on the host by the model
// and uploaded with the tokens: nothing is read back), one block per distinct token and one
// thread per channel, each walking only its token's rows. The grid depends on N only (blocks
// stride over the plan's S segments), so no launch waits for the data.
#include "backend/cuda/common.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/kernel_helpers.cuh"

namespace tda::cuda {

namespace {
constexpr int kThreads = 256;

__global__ void embedding_forward_kernel(float* y, const int32_t* tokens, const float* wte, int N,
                                         int C) {
  const size_t total = size_t(N) * C;
  TDA_GRID_STRIDE(i, total) {
    const size_t n = i / size_t(C), c = i % size_t(C);
    y[i] = wte[size_t(tokens[n]) * C + c];
  }
}

// Segments s = blockIdx.x, + gridDim.x, ... below S = plan[0]: token seg_token[s], rows
// order[seg_start[s] .. seg_start[s + 1]) (embedding_plan.h).
__global__ void embedding_backward_kernel(float* dwte, const float* dy, const int32_t* plan, int N,
                                          int C) {
  const int S = plan[0];
  const int32_t *order = plan + 1, *seg_token = order + N, *seg_start = seg_token + N;
  for (int s = blockIdx.x; s < S; s += gridDim.x) {
    const int r0 = seg_start[s], r1 = seg_start[s + 1];
    float* row = dwte + size_t(seg_token[s]) * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
      float acc = row[c];
      for (int r = r0; r < r1; ++r) acc += dy[size_t(order[r]) * C + c];
      row[c] = acc;
    }
  }
}
}  // namespace

void embedding_forward(float* y, const int32_t* tokens, const float* wte, int N, int C) {
  if (N == 0) return;
  check(launch<embedding_forward_kernel>(dim3(grid_for(size_t(N) * C, kThreads)), dim3(kThreads), 0,
                                         stream(), y, tokens, wte, N, C),
        "embedding_forward");
}

void embedding_backward(float* dwte, const float* dy, const int32_t* plan, int N, int C,
                        int max_blocks) {
  if (N == 0) return;
  check(launch<embedding_backward_kernel>(dim3(grid_for(size_t(N), 1, size_t(max_blocks))),
                                          dim3(kThreads), 0, stream(), dwte, dy, plan, N, C),
        "embedding_backward");
}

}  // namespace tda::cuda
