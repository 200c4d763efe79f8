// cudaMalloc with a name, for every device allocation of the backend and of the NCCL
// communicator. No CUDA header: code compiled by the host compiler against the real runtime
// (distributed/nccl_communicator.cpp in the GPU build) uses it too. Defined in gemm.cu.
#pragma once

#include <cstddef>
#include <string>

namespace tda::cuda {

// cudaMalloc of `bytes` for `what`, a name the user knows ("activation arena", "AdamW m"): out of
// memory throws one line naming it, its size and the device's free and total memory; any other
// failure throws as check() does. The emulator also files the allocation under that name
// (emu/budget.h: what filled the memory). Free with cudaFree.
void* device_alloc(size_t bytes, const std::string& what);

}  // namespace tda::cuda
