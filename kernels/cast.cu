// fp32 <-> bf16 casts, the first pieces of the bf16 storage path (docs/cuda.md):
//   y_i = bf16(x_i), round to nearest even (__float2bfloat16);  x_i = float(y_i), exact.
#include "backend/cuda/common.h"
#include "backend/cuda/kernel_helpers.cuh"

namespace tda::cuda {

namespace {
constexpr int kThreads = 256;

__global__ void to_bf16_kernel(__nv_bfloat16* y, const float* x, size_t n) {
  TDA_GRID_STRIDE(i, n)
  y[i] = __float2bfloat16(x[i]);
}

__global__ void to_float_kernel(float* x, const __nv_bfloat16* y, size_t n) {
  TDA_GRID_STRIDE(i, n)
  x[i] = __bfloat162float(y[i]);
}
}  // namespace

void cast_to_bf16(__nv_bfloat16* y, const float* x, size_t n) {
  if (n == 0) return;
  check(launch<to_bf16_kernel>(dim3(grid_for(n, kThreads)), dim3(kThreads), 0, stream(), y, x, n),
        "cast_to_bf16");
}

void cast_to_float(float* x, const __nv_bfloat16* y, size_t n) {
  if (n == 0) return;
  check(launch<to_float_kernel>(dim3(grid_for(n, kThreads)), dim3(kThreads), 0, stream(), x, y, n),
        "cast_to_float");
}

}  // namespace tda::cuda
