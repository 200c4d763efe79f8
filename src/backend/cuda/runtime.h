// The CUDA runtime for backend code: the real one under nvcc, the SIMT emulator (emu/emu.h)
// when a host compiler builds the CUDA sources with TDA_CUDA_EMU defined, and the real one for
// host-only code that the host compiler builds against the toolkit (TDA_CUDA_HOST: launches no
// kernel; cudnn_sdpa.cpp).
#pragma once

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

// Dynamic shared memory with one spelling for both builds. One byte array for all kernels keeps
// nvcc from complaining about one extern __shared__ name declared with different types.
#define TDA_DYNAMIC_SHARED(type, name)                                \
  extern __shared__ __align__(128) unsigned char tda_dynamic_smem_[]; \
  type* name = reinterpret_cast<type*>(tda_dynamic_smem_)
#elif defined(TDA_CUDA_EMU)
#include "backend/cuda/emu/emu.h"
#elif defined(TDA_CUDA_HOST)
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#else
#error "backend/cuda/runtime.h: compile with nvcc, or define TDA_CUDA_EMU to use the SIMT emulator"
#endif
