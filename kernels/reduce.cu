// Sum of squares (the gradient norm), deterministic two-stage reduction in double:
//   stage 1: block b sums x_i^2 over a fixed grid-stride set of i (kBlocks blocks, always the
//            same split for a given n) into partial[b];
//   stage 2: one block sums partial[0..kBlocks) in a fixed tree order.
// No atomics: the same input gives the same bits every run (bit-exact resume of clipping).
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gemm.h"

namespace tda::cuda {

namespace {
constexpr int kThreads = 256;
constexpr int kBlocks = 512;

// partial[blockIdx.x] = sum_{i = blockIdx.x*blockDim.x + threadIdx.x (mod grid)} x_i^2
__global__ void sum_squares_partial_kernel(const float* x, size_t n, double* partial) {
  __shared__ double smem[32];
  double s = 0.0;
  TDA_GRID_STRIDE(i, n)
  s += double(x[i]) * double(x[i]);
  s = block_sum(s, smem);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// out = sum_b partial[b]
__global__ void sum_partials_kernel(const double* partial, int n, double* out) {
  __shared__ double smem[32];
  double s = 0.0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += partial[i];
  s = block_sum(s, smem);
  if (threadIdx.x == 0) *out = s;
}
}  // namespace

size_t sum_squares_scratch() {
  return kBlocks + 1;
}

double sum_squares(const float* x, size_t n, double* scratch) {
  if (n == 0) return 0.0;
  const unsigned blocks = grid_for(n, kThreads, kBlocks);
  check(
      launch<sum_squares_partial_kernel>(dim3(blocks), dim3(kThreads), 0, stream(), x, n, scratch),
      "sum_squares_partial");
  check(launch<sum_partials_kernel>(dim3(1), dim3(kThreads), 0, stream(),
                                    static_cast<const double*>(scratch), int(blocks),
                                    scratch + kBlocks),
        "sum_partials");
  double out = 0.0;
  check(cudaMemcpy(&out, scratch + kBlocks, sizeof(double), cudaMemcpyDeviceToHost),
        "sum_squares copy");
  return out;
}

}  // namespace tda::cuda
