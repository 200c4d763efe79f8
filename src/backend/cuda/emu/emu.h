// Entry header of the SIMT emulator: compiling CUDA sources with the host compiler and
// TDA_CUDA_EMU defined makes them run on the CPU. See docs/emulator.md. Include it through
// backend/cuda/runtime.h, which picks the real runtime under nvcc.
#pragma once

#if defined(__CUDACC__)
#error "backend/cuda/emu/emu.h is for host-compiler builds; nvcc uses the real runtime"
#endif

// The toolkit headers are host-usable: they give dim3/uint3, cudaError_t and the runtime API
// declarations, and __nv_bfloat16/__half with bit-exact round-to-nearest-even conversions.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <vector_functions.h>

// The toolkit maps the execution-space keywords to nothing for a host compiler; restate that so
// the order of includes does not matter, and give __shared__ its emulated meaning: one instance
// per OS thread, which runs one block at a time, so all fibers of a block share it.
#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __constant__
#undef __managed__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __shared__ static thread_local
#define __constant__
#define __managed__
#define __launch_bounds__(...)
#ifndef __forceinline__
#define __forceinline__ inline __attribute__((always_inline))
#endif

#include "backend/cuda/emu/async_copy.h"
#include "backend/cuda/emu/device.h"
#include "backend/cuda/emu/launch.h"
#include "backend/cuda/emu/mma.h"
#include "backend/cuda/emu/runtime.h"
#include "backend/cuda/emu/scheduler.h"

// Dynamic shared memory: `extern __shared__ T name[];` cannot be emulated with a static, so
// kernels spell it TDA_DYNAMIC_SHARED(T, name) (backend/cuda/runtime.h gives the nvcc form).
#define TDA_DYNAMIC_SHARED(type, name) \
  type* name = reinterpret_cast<type*>(::tda::emu::dynamic_shared_memory())
