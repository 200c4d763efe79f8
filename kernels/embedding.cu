// Token embedding, as src/backend/cpu/embedding.cpp:
//   forward:  y(n, c) = wte(token_n, c)
//   backward: dwte(v, c) += dy(n, c) over the rows n with token v, in increasing n: the CPU
//             backend's order, so the result is deterministic (no atomics) and bit-identical.
// Backward plan: the rows are grouped by token on the host (a stable counting sort of the N
// token ids, downloaded: the micro-batch's backward is over by then), one block per distinct
// token and one thread per channel, each walking only its token's rows. (Walking all N rows per
// channel, as a first version did, is a serial chain of N dependent loads per thread.)
#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gemm.h"

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

// Segment s = blockIdx.x: token seg_token[s], rows order[seg_start[s] .. seg_start[s + 1]).
__global__ void embedding_backward_kernel(float* dwte, const float* dy, const int32_t* order,
                                          const int32_t* seg_token, const int32_t* seg_start,
                                          int C) {
  const int s = blockIdx.x;
  const int r0 = seg_start[s], r1 = seg_start[s + 1];
  float* row = dwte + size_t(seg_token[s]) * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float acc = row[c];
    for (int r = r0; r < r1; ++r) acc += dy[size_t(order[r]) * C + c];
    row[c] = acc;
  }
}
}  // namespace

void embedding_forward(float* y, const int32_t* tokens, const float* wte, int N, int C) {
  if (N == 0) return;
  check(launch<embedding_forward_kernel>(dim3(grid_for(size_t(N) * C, kThreads)), dim3(kThreads), 0,
                                         stream(), y, tokens, wte, N, C),
        "embedding_forward");
}

size_t embedding_backward_scratch(int N) {
  return 3 * size_t(N) + 1;
}

void embedding_backward(float* dwte, const float* dy, const int32_t* tokens, int N, int C,
                        int32_t* scratch) {
  if (N == 0) return;
  std::vector<int32_t> tok(static_cast<size_t>(N));
  check(cudaMemcpy(tok.data(), tokens, tok.size() * sizeof(int32_t), cudaMemcpyDeviceToHost),
        "embedding_backward tokens");
  // Stable counting sort of the rows by token: plan = [order (N) | seg_token (S) | seg_start (S+1)]
  const int32_t V = *std::max_element(tok.begin(), tok.end()) + 1;
  std::vector<int32_t> first(size_t(V) + 1, 0);
  for (int32_t t : tok) ++first[size_t(t) + 1];
  for (int32_t v = 0; v < V; ++v) first[size_t(v) + 1] += first[size_t(v)];
  std::vector<int32_t> plan(size_t(N), 0), seg_token, seg_start;
  std::vector<int32_t> next(first.begin(), first.end() - 1);
  for (int32_t n = 0; n < N; ++n) plan[size_t(next[size_t(tok[size_t(n)])]++)] = n;
  for (int32_t v = 0; v < V; ++v)
    if (first[size_t(v) + 1] > first[size_t(v)]) {
      seg_token.push_back(v);
      seg_start.push_back(first[size_t(v)]);
    }
  const int S = int(seg_token.size());
  seg_start.push_back(N);
  plan.insert(plan.end(), seg_token.begin(), seg_token.end());
  plan.insert(plan.end(), seg_start.begin(), seg_start.end());
  check(cudaMemcpy(scratch, plan.data(), plan.size() * sizeof(int32_t), cudaMemcpyHostToDevice),
        "embedding_backward plan");
  check(launch<embedding_backward_kernel>(dim3(unsigned(S)), dim3(kThreads), 0, stream(), dwte, dy,
                                          static_cast<const int32_t*>(scratch),
                                          static_cast<const int32_t*>(scratch + N),
                                          static_cast<const int32_t*>(scratch + N + S), C),
        "embedding_backward");
}

}  // namespace tda::cuda
