// cp.async: global -> shared copies that do not pass through registers, so a tile for the next
// iteration loads while this one is computed. The PTX instructions under nvcc (sm_80+), the
// emulation with deferred completion (backend/cuda/emu/async_copy.h) under the SIMT emulator.
// The pattern every use follows:
//   cp_async_16(...) for each 16-byte chunk;  cp_async_commit();   // one group per tile
//   cp_async_wait<n>();  __syncthreads();     // this thread's older groups landed; then everyone's
#pragma once

#include "backend/cuda/runtime.h"

namespace tda::cuda {

// 16 bytes from global src to shared dst, both 16-byte aligned; only the first src_bytes (0..16)
// are read, the rest of dst is zero-filled (src_bytes = 0 for a row past the matrix).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, int src_bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
               "r"(src_bytes));
#elif defined(__CUDA_ARCH__)
  (void)dst, (void)src, (void)src_bytes;
  __trap();  // cp.async needs sm_80
#elif defined(TDA_CUDA_EMU)
  ::tda::emu::cp_async_16(dst, src, src_bytes);
#else
  (void)dst, (void)src, (void)src_bytes;  // nvcc's host pass: never called
#endif
}

// Closes the group of the copies issued since the last commit.
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#elif defined(TDA_CUDA_EMU)
  ::tda::emu::cp_async_commit();
#endif
}

// Waits until at most the newest kPending committed groups of this thread are in flight. Other
// threads' copies need a __syncthreads after it.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
#elif defined(TDA_CUDA_EMU)
  ::tda::emu::cp_async_wait(kPending);
#endif
}

}  // namespace tda::cuda
