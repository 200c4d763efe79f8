// The one way kernels are launched, so that every call site works under nvcc and the emulator:
//   TDA_CUDA_CHECK(tda::cuda::launch(kernel, grid, block, shmem_bytes, stream, args...));
#pragma once

#include <utility>

#include "backend/cuda/runtime.h"

namespace tda::cuda {

// Launches kernel<<<grid, block, shmem_bytes, stream>>>(args...) and returns the launch error
// (cudaGetLastError). Arguments convert to the kernel's parameter types as in a real launch.
template <class... P, class... A>
inline cudaError_t launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t shmem_bytes,
                          cudaStream_t stream, A&&... args) {
#if defined(__CUDACC__)
  kernel<<<grid, block, shmem_bytes, stream>>>(std::forward<A>(args)...);
  return cudaGetLastError();
#else
  return ::tda::emu::launch(kernel, grid, block, shmem_bytes, stream, std::forward<A>(args)...);
#endif
}

}  // namespace tda::cuda
