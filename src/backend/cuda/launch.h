// The one way kernels are launched, so that every call site works under nvcc and the emulator:
//   TDA_CUDA_CHECK(tda::cuda::launch<kernel>(grid, block, shmem_bytes, stream, args...));
// The kernel is a template argument so that the emulator knows its name (template arguments
// included), which its strict mode needs to find the kernel's resources in the nvcc build.
#pragma once

#include <cstdlib>
#include <cstring>
#include <utility>

#include "backend/cuda/runtime.h"

namespace tda::cuda {

// TDA_CUDA_SYNC=1: wait for every kernel (and GEMM) right after its launch, so that a fault is
// reported by the call that caused it. A GPU reports kernel faults asynchronously, at some later
// call; CUDA_LAUNCH_BLOCKING=1 does the same for the whole process, in the driver.
inline bool sync_launches() {
  static const bool on = [] {
    const char* e = std::getenv("TDA_CUDA_SYNC");
    return e && *e && std::strcmp(e, "0") != 0;
  }();
  return on;
}

// Launches Kernel<<<grid, block, shmem_bytes, stream>>>(args...) and returns the launch error
// (cudaGetLastError; with TDA_CUDA_SYNC=1 also the kernel's own). Arguments convert to the
// kernel's parameter types as in a real launch.
template <auto Kernel, class... A>
inline cudaError_t launch(dim3 grid, dim3 block, size_t shmem_bytes, cudaStream_t stream,
                          A&&... args) {
#if defined(__CUDACC__)
  Kernel<<<grid, block, shmem_bytes, stream>>>(std::forward<A>(args)...);
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess && sync_launches()) err = cudaDeviceSynchronize();
  return err;
#else
  return ::tda::emu::launch<Kernel>(grid, block, shmem_bytes, stream, std::forward<A>(args)...);
#endif
}

}  // namespace tda::cuda
