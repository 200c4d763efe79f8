// RMSNorm, one warp per row (kRowsPerBlock rows per block), as src/backend/cpu/rmsnorm.cpp:
//   forward:  rstd = 1 / sqrt(mean(x^2) + eps);  y = w * x * rstd     (y may alias x)
//   backward (h = w * dy):  dx += rstd * h - x * rstd^3 * mean(h * x);  dw += sum_n dy x rstd
// dw is a reduction over rows done in fixed-order stages (no atomics): per chunk of chunk_rows
// (kRmsnormDwRows = 32) rows into scratch (chunk, C), then over the chunks by column_sum
// (reduce.cu: many blocks, fixed groups). The chunks are the grid's x (grid.h): the TRA/TDA/Diff
// head norms have N = B*T*H rows, 98,304 chunks at B = 4, T = 65,536, H = 12, past grid.y's
// 65,535.
#include "backend/cuda/common.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/grid.h"
#include "backend/cuda/kernel_helpers.cuh"

namespace tda::cuda {

namespace {
constexpr int kRowsPerBlock = 4;
constexpr int kDwThreads = 128;

__device__ __forceinline__ void store(float* p, float v) {
  *p = v;
}
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) {
  *p = __float2bfloat16(v);
}

// One warp's row n; Y = float (y may alias x) or __nv_bfloat16 (y = bf16(w x r), the bf16 path's
// stored GEMM input, mixed_precision.h).
template <class Y>
__device__ __forceinline__ void rmsnorm_row(Y* y, float* rstd, const float* x, const float* w,
                                            int N, int C, float eps) {
  const int lane = threadIdx.x % kWarp;
  const int n = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  if (n >= N) return;  // whole warps exit together: no collective is left waiting
  const float* xr = x + size_t(n) * C;
  Y* yr = y + size_t(n) * C;
  float ss = 0.0f;
  for (int c = lane; c < C; c += kWarp) ss += xr[c] * xr[c];
  ss = warp_sum(ss);
  const float r = 1.0f / sqrtf(ss / C + eps);
  for (int c = lane; c < C; c += kWarp) store(yr + c, w[c] * xr[c] * r);
  if (lane == 0) rstd[n] = r;
}

__global__ void rmsnorm_forward_kernel(float* y, float* rstd, const float* x, const float* w, int N,
                                       int C, float eps) {
  rmsnorm_row(y, rstd, x, w, N, C, eps);
}

__global__ void rmsnorm_forward_bf16_kernel(__nv_bfloat16* y, float* rstd, const float* x,
                                            const float* w, int N, int C, float eps) {
  rmsnorm_row(y, rstd, x, w, N, C, eps);
}

// dx += w dy r - x (sum_c w dy x) r^3 / C; dx16 (when given) = bf16(dx) after the sum: the bf16
// path's residual gradient as the next backward GEMMs read it (mixed_precision.h).
__global__ void rmsnorm_backward_dx_kernel(float* dx, __nv_bfloat16* dx16, const float* dy,
                                           const float* x, const float* w, const float* rstd,
                                           int N, int C) {
  const int lane = threadIdx.x % kWarp;
  const int n = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  if (n >= N) return;
  const float* xr = x + size_t(n) * C;
  const float* dyr = dy + size_t(n) * C;
  float* dxr = dx + size_t(n) * C;
  const float r = rstd[n];
  float hx = 0.0f;
  for (int c = lane; c < C; c += kWarp) hx += w[c] * dyr[c] * xr[c];
  hx = warp_sum(hx);
  const float k = hx * r * r * r / C;
  __nv_bfloat16* dx16r = dx16 ? dx16 + size_t(n) * C : nullptr;
  for (int c = lane; c < C; c += kWarp) {
    dxr[c] += w[c] * dyr[c] * r - xr[c] * k;
    if (dx16r) dx16r[c] = __float2bfloat16(dxr[c]);
  }
}

// partial(chunk, c) = sum_{n in chunk} dy(n,c) x(n,c) rstd(n), rows in increasing order
__global__ void rmsnorm_dw_partial_kernel(float* partial, const float* dy, const float* x,
                                          const float* rstd, int N, int C, int chunk_rows) {
  const int c = blockIdx.y * blockDim.x + threadIdx.x;
  const int chunk = blockIdx.x;
  if (c >= C) return;
  const int n1 = min(N, (chunk + 1) * chunk_rows);
  float s = 0.0f;
  for (int n = chunk * chunk_rows; n < n1; ++n)
    s += dy[size_t(n) * C + c] * x[size_t(n) * C + c] * rstd[n];
  partial[size_t(chunk) * C + c] = s;
}

int chunks_of(int N, int chunk_rows) {
  return (N + chunk_rows - 1) / chunk_rows;
}
}  // namespace

void rmsnorm_forward(float* y, float* rstd, const float* x, const float* w, int N, int C,
                     float eps) {
  if (N == 0) return;
  const unsigned blocks = unsigned((N + kRowsPerBlock - 1) / kRowsPerBlock);
  check(launch<rmsnorm_forward_kernel>(dim3(blocks), dim3(kRowsPerBlock * kWarp), 0, stream(), y,
                                       rstd, x, w, N, C, eps),
        "rmsnorm_forward");
}

void rmsnorm_forward(__nv_bfloat16* y, float* rstd, const float* x, const float* w, int N, int C,
                     float eps) {
  if (N == 0) return;
  const unsigned blocks = unsigned((N + kRowsPerBlock - 1) / kRowsPerBlock);
  check(launch<rmsnorm_forward_bf16_kernel>(dim3(blocks), dim3(kRowsPerBlock * kWarp), 0, stream(),
                                            y, rstd, x, w, N, C, eps),
        "rmsnorm_forward (bf16 y)");
}

size_t rmsnorm_backward_scratch(int N, int C, int chunk_rows) {
  const int chunks = chunks_of(N, chunk_rows);
  return size_t(chunks) * size_t(C) + column_sum_scratch(chunks, C);
}

void rmsnorm_backward(float* dx, float* dw, const float* dy, const float* x, const float* w,
                      const float* rstd, int N, int C, float* scratch, __nv_bfloat16* dx16) {
  if (N == 0) return;
  const unsigned blocks = unsigned((N + kRowsPerBlock - 1) / kRowsPerBlock);
  check(launch<rmsnorm_backward_dx_kernel>(dim3(blocks), dim3(kRowsPerBlock * kWarp), 0, stream(),
                                           dx, dx16, dy, x, w, rstd, N, C),
        "rmsnorm_backward_dx");
  rmsnorm_backward_dw(dw, dy, x, rstd, N, C, scratch);
}

void rmsnorm_backward_dw(float* dw, const float* dy, const float* x, const float* rstd, int N,
                         int C, float* scratch, int chunk_rows) {
  if (N == 0) return;
  const int chunks = chunks_of(N, chunk_rows);
  const int threads = column_threads(size_t(C), kDwThreads);
  const dim3 grid = chunk_column_grid(size_t(chunks), size_t(C), threads, "rmsnorm_dw_partial");
  check(launch<rmsnorm_dw_partial_kernel>(grid, dim3(threads), 0, stream(), scratch, dy, x, rstd, N,
                                          C, chunk_rows),
        "rmsnorm_dw_partial");
  column_sum(dw, scratch, chunks, C, size_t(C), scratch + size_t(chunks) * C);
}

}  // namespace tda::cuda
