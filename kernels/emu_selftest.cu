// Kernels that prove the kernel-facing headers (async_copy.h, launch.h, mma.h, runtime.h) compile
// under nvcc for sm_80/sm_90 and run unchanged under the SIMT emulator (tests/test_emu_selftest.cpp
// includes this file with TDA_CUDA_EMU defined).
#include <cstdint>

#include "backend/cuda/async_copy.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/mma.h"
#include "backend/cuda/runtime.h"

namespace tda::cuda::selftest {

constexpr int kSumThreads = 256;

// out[0] += sum(x): grid-stride loads, a warp reduction by shuffles, per-warp partials in dynamic
// shared memory, one atomicAdd per block.
__global__ void __launch_bounds__(kSumThreads)
    block_sum_kernel(const float* __restrict__ x, float* out, int n) {
  TDA_DYNAMIC_SHARED(float, partial);
  float v = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v += x[i];
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = blockDim.x / 32;
    v = lane < warps ? partial[lane] : 0.0f;
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (lane == 0) atomicAdd(out, v);
  }
}

// C[M][N] = A[M][K] * W[N][K]^T (the nn.Linear layout), bf16 in, fp32 out. One warp per 16x8
// tile of C; M % 16 == 0, N % 8 == 0, K % 16 == 0.
__global__ void __launch_bounds__(32)
    gemm_bf16_kernel(const __nv_bfloat16* __restrict__ a, const __nv_bfloat16* __restrict__ w,
                     float* __restrict__ c, int m, int n, int k) {
  // 16-byte rows for ldmatrix; the padding of 8 elements staggers rows across banks on the GPU.
  __shared__ __align__(16) __nv_bfloat16 a_tile[16][24];
  __shared__ __align__(16) __nv_bfloat16 w_tile[8][24];
  const int lane = threadIdx.x;
  if (static_cast<int>(blockIdx.y) * 16 >= m)
    return;  // grids rounded up by a caller would overrun A
  const int row0 = blockIdx.y * 16, col0 = blockIdx.x * 8;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int k0 = 0; k0 < k; k0 += 16) {
    // 16x16 A elements and 8x16 W elements, staged by 32 lanes as pairs of bf16.
    for (int i = lane; i < 16 * 8; i += 32) {
      const int r = i / 8, cc = 2 * (i % 8);
      a_tile[r][cc] = a[(row0 + r) * k + k0 + cc];
      a_tile[r][cc + 1] = a[(row0 + r) * k + k0 + cc + 1];
    }
    for (int i = lane; i < 8 * 16; i += 32) {
      const int r = i / 16, cc = i % 16;
      w_tile[r][cc] = w[(col0 + r) * k + k0 + cc];
    }
    __syncwarp();
    uint32_t af[4], bf[2];
    // x4: lanes 0-15 address rows 0-15 at column 0, lanes 16-31 rows 0-15 at column 8.
    ldmatrix_x4(af, &a_tile[lane % 16][(lane / 16) * 8]);
    // x2: lanes 0-7 address W rows (= B columns) at k 0..7, lanes 8-15 at k 8..15.
    ldmatrix_x2(bf, &w_tile[lane % 8][((lane / 8) % 2) * 8]);
    mma_m16n8k16_bf16(acc, af, bf, acc);
    __syncwarp();
  }
  const int g = lane / 4, t = lane % 4;
  c[(row0 + g) * n + col0 + 2 * t] = acc[0];
  c[(row0 + g) * n + col0 + 2 * t + 1] = acc[1];
  c[(row0 + g + 8) * n + col0 + 2 * t] = acc[2];
  c[(row0 + g + 8) * n + col0 + 2 * t + 1] = acc[3];
}

// out[c] = sum over rows of x[r][c], x of (rows x kPipeCols) floats: one block streams x through
// shared memory in tiles of kPipeRows rows, double-buffered with cp.async (the pattern of the
// attention kernels' K/V tiles): tile t + 1 is issued before tile t is read. Each thread sums one
// column over half of each tile's rows, so it reads rows that other threads copied. `skip` drops
// one step of the protocol (PipeSkip), the emulator's negative controls.
constexpr int kPipeThreads = 128, kPipeCols = 64, kPipeRows = 16;
// kSkipZeroFillClamp: a zero-filled row keeps its own address, past the end of x.
enum PipeSkip : int {
  kSkipNothing,
  kSkipWait,
  kSkipBarrierAfterWait,
  kSkipBarrierBeforeRefill,
  kSkipZeroFillClamp
};

__global__ void __launch_bounds__(kPipeThreads)
    pipelined_column_sums_kernel(const float* __restrict__ x, float* out, int rows, int skip) {
  constexpr int kTileFloats = kPipeRows * kPipeCols, kChunksPerRow = kPipeCols / 4;
  TDA_DYNAMIC_SHARED(float, buf);  // two tiles
  auto issue = [&](int tile) {     // tile into buffer tile % 2, one commit group
    for (int c = threadIdx.x; c < kPipeRows * kChunksPerRow; c += kPipeThreads) {
      const int r = c / kChunksPerRow, col = 4 * (c % kChunksPerRow), row = tile * kPipeRows + r;
      const bool in = row < rows;  // rows past the end are zero-filled
      cp_async_16(buf + (tile % 2) * kTileFloats + r * kPipeCols + col,
                  x + size_t(in || skip == kSkipZeroFillClamp ? row : 0) * kPipeCols + col,
                  in ? 16 : 0);
    }
    cp_async_commit();
  };
  const int tiles = (rows + kPipeRows - 1) / kPipeRows;
  const int col = threadIdx.x % kPipeCols, half = threadIdx.x / kPipeCols;
  float sum = 0.f;
  issue(0);
  for (int t = 0; t < tiles; ++t) {
    if (t + 1 < tiles)
      issue(t + 1);
    else
      cp_async_commit();  // an empty group: "all but the newest one" stays tile t
    if (skip != kSkipWait) cp_async_wait<1>();
    if (skip != kSkipBarrierAfterWait) __syncthreads();
    const float* tile = buf + (t % 2) * kTileFloats;
    for (int r = half; r < kPipeRows; r += 2) sum += tile[r * kPipeCols + col];
    if (skip != kSkipBarrierBeforeRefill) __syncthreads();  // before tile t + 2 refills it
  }
  __syncthreads();
  buf[threadIdx.x] = sum;  // the halves' partial sums, then one thread per column adds them
  __syncthreads();
  if (half == 0) out[col] = buf[col] + buf[col + kPipeCols];
}

inline cudaError_t pipelined_column_sums(const float* x, float* out, int rows, PipeSkip skip,
                                         cudaStream_t stream) {
  const size_t shmem = 2 * kPipeRows * kPipeCols * sizeof(float);
  return launch<pipelined_column_sums_kernel>(dim3(1), dim3(kPipeThreads), shmem, stream, x, out,
                                              rows, int(skip));
}

inline cudaError_t block_sum(const float* x, float* out, int n, int blocks, cudaStream_t stream) {
  const size_t shmem = (kSumThreads / 32) * sizeof(float);
  return launch<block_sum_kernel>(dim3(blocks), dim3(kSumThreads), shmem, stream, x, out, n);
}

inline cudaError_t gemm_bf16(const __nv_bfloat16* a, const __nv_bfloat16* w, float* c, int m, int n,
                             int k, cudaStream_t stream) {
  return launch<gemm_bf16_kernel>(dim3(n / 8, m / 16), dim3(32), 0, stream, a, w, c, m, n, k);
}

}  // namespace tda::cuda::selftest
