// Device helpers shared by the kernels of the CUDA backend (kernels/*.cu): warp and block
// reductions in a fixed order (deterministic: no atomics), grid sizing.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/launch.h"
#include "backend/cuda/runtime.h"

// Loop unrolling hint: nvcc only (g++ would warn about an unknown pragma).
#if defined(__CUDACC__)
#define TDA_UNROLL _Pragma("unroll")
#else
#define TDA_UNROLL
#endif

namespace tda::cuda {

constexpr int kWarp = 32;

// A grid-stride loop: thread i takes items i, i + (threads in the grid), ... below n.
#define TDA_GRID_STRIDE(i, n)                                             \
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += size_t(gridDim.x) * blockDim.x)

// Blocks for a grid-stride loop over n items: enough to cover n, capped (the loop does the rest).
inline unsigned grid_for(size_t n, int threads, size_t cap = 8192) {
  const size_t b = (n + size_t(threads) - 1) / size_t(threads);
  return unsigned(std::max<size_t>(1, std::min(b, cap)));
}

// Butterfly reduction: every lane ends with the same value, summed in the same order.
template <class T>
__device__ inline T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32); every thread gets the result. `smem` holds
// 32 values; the trailing barrier lets the caller reuse it at once.
template <class T>
__device__ inline T block_sum(T v, T* smem) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  v = warp_sum(v);
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = lane < warps ? smem[lane] : T(0);
  v = warp_sum(v);
  __syncthreads();
  return v;
}

__device__ inline float block_max(float v, float* smem) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  v = warp_max(v);
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = lane < warps ? smem[lane] : -INFINITY;
  v = warp_max(v);
  __syncthreads();
  return v;
}

// 16-byte global loads and 8-byte stores: the GPU faults on a misaligned vector access, which a
// host compiler would let pass; the emulator checks it (the kernel fails naming the address).
template <size_t kAlign>
__device__ inline void check_vector_alignment(const void* p) {
#if defined(TDA_CUDA_EMU)
  if (reinterpret_cast<uintptr_t>(p) % kAlign != 0)
    ::tda::emu::detail::fail("misaligned %zu-byte vector access at %p", kAlign, p);
#else
  (void)p;
#endif
}
__device__ inline float4 load_float4(const float* p) {
  check_vector_alignment<16>(p);
  return *reinterpret_cast<const float4*>(p);
}
__device__ inline void store_u32x2(void* p, uint32_t lo, uint32_t hi) {
  check_vector_alignment<8>(p);
  *reinterpret_cast<uint2*>(p) = make_uint2(lo, hi);
}

}  // namespace tda::cuda
