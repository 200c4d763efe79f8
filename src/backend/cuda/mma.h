// Tensor-core primitives behind small wrappers: the PTX instruction under nvcc (device pass),
// the lane-exact emulation (backend/cuda/emu/mma.h) under the SIMT emulator. Fragment layouts
// are those of the PTX ISA for mma.m16n8k16 and ldmatrix.m8n8; see docs/emulator.md.
#pragma once

#include <cstdint>

#include "backend/cuda/runtime.h"

namespace tda::cuda {

// D = A * B + C for one warp: A 16x16 bf16 row-major (4 regs), B 16x8 bf16 column-major
// (2 regs), C and D 16x8 fp32 (4 regs). All 32 lanes must call it together. d may alias c.
__device__ __forceinline__ void mma_m16n8k16_bf16(float d[4], const uint32_t a[4],
                                                  const uint32_t b[2], const float c[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]));
#elif defined(__CUDA_ARCH__)
  (void)d, (void)a, (void)b, (void)c;
  __trap();  // bf16 mma needs sm_80
#elif defined(TDA_CUDA_EMU)
  ::tda::emu::mma_m16n8k16_bf16(d, a, b, c);
#else
  (void)d, (void)a, (void)b, (void)c;  // nvcc's host pass: never called
#endif
}

#if defined(__CUDA_ARCH__)
#define TDA_LDMATRIX(shape, n, ...)                                                    \
  const unsigned tda_addr = static_cast<unsigned>(__cvta_generic_to_shared(smem_row)); \
  asm volatile("ldmatrix.sync.aligned.m8n8." shape ".shared.b16 " __VA_ARGS__ : "r"(tda_addr))
#endif

// ldmatrix.m8n8.x{1,2,4}[.trans].b16 from shared memory: lanes 8i..8i+7 pass the addresses of rows
// 0..7 of matrix i (16-byte aligned, 8 consecutive b16 each); r[i] receives lane l's part of
// matrix i: row l/4, columns 2(l%4)..2(l%4)+1 (of the transposed matrix with .trans).
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void* smem_row) {
#if defined(__CUDA_ARCH__)
  TDA_LDMATRIX("x4", 4, "{%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]));
#elif defined(TDA_CUDA_EMU)
  ::tda::emu::ldmatrix(r, smem_row, 4, false);
#else
  (void)r, (void)smem_row;
#endif
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void* smem_row) {
#if defined(__CUDA_ARCH__)
  TDA_LDMATRIX("x4.trans", 4, "{%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]));
#elif defined(TDA_CUDA_EMU)
  ::tda::emu::ldmatrix(r, smem_row, 4, true);
#else
  (void)r, (void)smem_row;
#endif
}

__device__ __forceinline__ void ldmatrix_x2(uint32_t r[2], const void* smem_row) {
#if defined(__CUDA_ARCH__)
  TDA_LDMATRIX("x2", 2, "{%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]));
#elif defined(TDA_CUDA_EMU)
  ::tda::emu::ldmatrix(r, smem_row, 2, false);
#else
  (void)r, (void)smem_row;
#endif
}

__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t r[2], const void* smem_row) {
#if defined(__CUDA_ARCH__)
  TDA_LDMATRIX("x2.trans", 2, "{%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]));
#elif defined(TDA_CUDA_EMU)
  ::tda::emu::ldmatrix(r, smem_row, 2, true);
#else
  (void)r, (void)smem_row;
#endif
}

#if defined(TDA_LDMATRIX)
#undef TDA_LDMATRIX
#endif

}  // namespace tda::cuda
