// RMSNorm, one warp per row (kRowsPerBlock rows per block), as src/backend/cpu/rmsnorm.cpp:
//   forward:  rstd = 1 / sqrt(mean(x^2) + eps);  y = w * x * rstd     (y may alias x)
//   backward (h = w * dy):  dx += rstd * h - x * rstd^3 * mean(h * x);  dw += sum_n dy x rstd
// dw is a reduction over rows done in fixed-order stages (no atomics): per chunk of chunk_rows
// (kRmsnormDwRows = 32) rows into scratch (chunk, C), then over the chunks by column_sum
// (reduce.cu: many blocks, fixed groups). The backward is one kernel per chunk (dx of its rows,
// then its dw partial: llm.c's fused layernorm backward, in a fixed order), so dy and x come from
// memory once; the chunks are the grid's x (grid.h): the Diff head norms have N = B*T*H rows,
// 98,304 chunks at B = 4, T = 65,536, H = 12, past grid.y's 65,535.
#include <algorithm>

#include "backend/cuda/common.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/grid.h"
#include "backend/cuda/kernel_helpers.cuh"

namespace tda::cuda {

namespace {
constexpr int kRowsPerBlock = 4;
constexpr int kBackwardThreads = 256;  // per chunk: 8 warps on its rows, then on its columns

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

// One block per chunk of chunk_rows rows. First its warps take the chunk's rows, one warp per
// row (as the forward): dx += w dy r - x (sum_c w dy x) r^3 / C; dx16 (when given) = bf16(dx)
// after the sum, the bf16 path's residual gradient as the next backward GEMMs read it
// (mixed_precision.h). Then its threads take the columns: partial(chunk, c) = sum_{n in chunk}
// dy(n,c) x(n,c) rstd(n), rows in increasing order. The second pass reads only inputs (dx must
// not overlap dy or x), so it needs no barrier, and re-reads the rows the first just read: from
// L1/L2 on a GPU, where the two-kernel form read dy and x from memory twice.
__global__ void rmsnorm_backward_kernel(float* dx, __nv_bfloat16* dx16, float* partial,
                                        const float* dy, const float* x, const float* w,
                                        const float* rstd, int N, int C, int chunk_rows) {
  const int lane = threadIdx.x % kWarp, warps = int(blockDim.x) / kWarp;
  const int chunk = int(blockIdx.x);
  const int n0 = chunk * chunk_rows, n1 = min(N, n0 + chunk_rows);
  for (int n = n0 + int(threadIdx.x) / kWarp; n < n1; n += warps) {  // whole warps: warp_sum
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
  for (int c = int(threadIdx.x); c < C; c += int(blockDim.x)) {
    float s = 0.0f;
    for (int n = n0; n < n1; ++n) s += dy[size_t(n) * C + c] * x[size_t(n) * C + c] * rstd[n];
    partial[size_t(chunk) * C + c] = s;
  }
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
                      const float* rstd, int N, int C, float* scratch, __nv_bfloat16* dx16,
                      int chunk_rows) {
  if (N == 0) return;
  const int chunks = chunks_of(N, chunk_rows);
  // up to 8 warps on a chunk's rows, and a thread per column up to kBackwardThreads
  const int threads =
      column_threads(size_t(std::max(C, std::min(chunk_rows, 8) * kWarp)), kBackwardThreads);
  check(launch<rmsnorm_backward_kernel>(dim3(unsigned(chunks)), dim3(threads), 0, stream(), dx,
                                        dx16, scratch, dy, x, w, rstd, N, C, chunk_rows),
        "rmsnorm_backward");
  column_sum(dw, scratch, chunks, C, size_t(C), scratch + size_t(chunks) * C);
}

}  // namespace tda::cuda
