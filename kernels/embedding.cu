// Token embedding, as src/backend/cpu/embedding.cpp:
//   forward:  y(n, c) = wte(token_n, c)
//   backward: dwte(token_n, c) += dy(n, c), one thread per channel c walking the rows in order,
//             so repeated tokens accumulate in a fixed order (deterministic, no atomics; the
//             same order as the CPU backend, hence bit-identical to it).
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gemm.h"

namespace tda::cuda {

namespace {
constexpr int kThreads = 256;

__global__ void embedding_forward_kernel(float* y, const int32_t* tokens, const float* wte, int N,
                                         int C) {
  const size_t total = size_t(N) * C;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    const size_t n = i / size_t(C), c = i % size_t(C);
    y[i] = wte[size_t(tokens[n]) * C + c];
  }
}

__global__ void embedding_backward_kernel(float* dwte, const float* dy, const int32_t* tokens,
                                          int N, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  for (int n = 0; n < N; ++n) dwte[size_t(tokens[n]) * C + c] += dy[size_t(n) * C + c];
}
}  // namespace

void embedding_forward(float* y, const int32_t* tokens, const float* wte, int N, int C) {
  if (N == 0) return;
  check(launch(embedding_forward_kernel, dim3(grid_for(size_t(N) * C, kThreads)), dim3(kThreads), 0,
               stream(), y, tokens, wte, N, C),
        "embedding_forward");
}

void embedding_backward(float* dwte, const float* dy, const int32_t* tokens, int N, int C) {
  if (N == 0) return;
  check(launch(embedding_backward_kernel, dim3(unsigned((C + kThreads - 1) / kThreads)),
               dim3(kThreads), 0, stream(), dwte, dy, tokens, N, C),
        "embedding_backward");
}

}  // namespace tda::cuda
