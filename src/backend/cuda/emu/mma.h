// Lane-exact emulation of the tensor-core instructions the kernels use. Each is a warp collective:
// the 32 lanes' fragments are gathered at one scheduling point, the matrices are rebuilt from the
// fragment layouts of the PTX ISA ("Matrix Fragments for mma.m16n8k16 with floating point type",
// "ldmatrix"), multiplied, and scattered back.
#pragma once

#include <cstdint>
#include <cstring>

#include "backend/cuda/emu/scheduler.h"

namespace tda::emu {

namespace detail {

inline float bf16_bits_to_float(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

struct MmaIn {
  const uint32_t* a;
  const uint32_t* b;
  const float* c;
};

// m16n8k16, A row-major 16x16, B "col" (k-major per column) 16x8, C/D 16x8 fp32.
//   groupID = lane >> 2, tig = lane & 3
//   A regs: {a0,a1}=(g, 2t..2t+1) {a2,a3}=(g+8, 2t..) {a4,a5}=(g, 2t+8..) {a6,a7}=(g+8, 2t+8..)
//   B regs: {b0,b1}=(k=2t..2t+1, n=g) {b2,b3}=(k=2t+8.., n=g)
//   C/D:    c0,c1=(g, 2t..2t+1) c2,c3=(g+8, 2t..)
// The lower 16 bits of a register hold the element with the smaller index.
inline void mma_m16n8k16_bf16_op(const WarpGroup& g) {
  float a[16][16], b[16][8], c[16][8];
  for (unsigned lane = 0; lane < 32; ++lane) {
    const auto& in = *static_cast<const MmaIn*>(g.in[lane]);
    const unsigned gid = lane >> 2, t = lane & 3u;
    for (unsigned r = 0; r < 4; ++r) {
      const unsigned row = gid + 8 * (r & 1u), col = 2 * t + 8 * (r >> 1);
      a[row][col] = bf16_bits_to_float(static_cast<uint16_t>(in.a[r] & 0xffffu));
      a[row][col + 1] = bf16_bits_to_float(static_cast<uint16_t>(in.a[r] >> 16));
    }
    for (unsigned r = 0; r < 2; ++r) {
      const unsigned k = 2 * t + 8 * r;
      b[k][gid] = bf16_bits_to_float(static_cast<uint16_t>(in.b[r] & 0xffffu));
      b[k + 1][gid] = bf16_bits_to_float(static_cast<uint16_t>(in.b[r] >> 16));
    }
    for (unsigned r = 0; r < 4; ++r) c[gid + 8 * (r >> 1)][2 * t + (r & 1u)] = in.c[r];
  }
  // bf16 x bf16 products are exact in double and so is their 16-term sum unless the magnitudes
  // span more than ~2^37; one final rounding to fp32. Hardware adds in an unspecified order with
  // its own intermediate precision, so agreement with a GPU is to within a few fp32 ulps of the
  // largest partial sum, not bitwise.
  for (unsigned lane = 0; lane < 32; ++lane) {
    const unsigned gid = lane >> 2, t = lane & 3u;
    auto* d = static_cast<float*>(g.out[lane]);
    for (unsigned r = 0; r < 4; ++r) {
      const unsigned row = gid + 8 * (r >> 1), col = 2 * t + (r & 1u);
      double acc = c[row][col];
      for (unsigned k = 0; k < 16; ++k) acc += static_cast<double>(a[row][k]) * b[k][col];
      d[r] = static_cast<float>(acc);
    }
  }
}

struct LdmatrixIn {
  const unsigned char* row;  // this lane's row address (used when the lane supplies one)
  unsigned num;              // 1, 2 or 4 matrices
  bool trans;
};

// ldmatrix.m8n8.b16: lanes 8i..8i+7 give the addresses of rows 0..7 of matrix i; register i of
// lane l receives row l/4, columns 2(l%4) and 2(l%4)+1 of matrix i (of its transpose with .trans).
inline void ldmatrix_op(const WarpGroup& g) {
  const auto& in0 = *static_cast<const LdmatrixIn*>(g.in[0]);
  for (unsigned lane = 0; lane < 32; ++lane) {
    const auto& in = *static_cast<const LdmatrixIn*>(g.in[lane]);
    if (in.num != in0.num || in.trans != in0.trans)
      fail("lanes of a warp execute different ldmatrix variants");
  }
  for (unsigned lane = 0; lane < 8 * in0.num; ++lane) {
    const auto* p = static_cast<const LdmatrixIn*>(g.in[lane])->row;
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
      fail("ldmatrix row address of lane %u is not 16-byte aligned", lane);
  }
  auto element = [&](unsigned m, unsigned row, unsigned col) {
    uint16_t v;
    std::memcpy(&v, static_cast<const LdmatrixIn*>(g.in[8 * m + row])->row + 2 * col, 2);
    return static_cast<uint32_t>(v);
  };
  for (unsigned lane = 0; lane < 32; ++lane) {
    auto* r = static_cast<uint32_t*>(g.out[lane]);
    const unsigned row = lane >> 2, col = 2 * (lane & 3u);
    for (unsigned m = 0; m < in0.num; ++m) {
      if (!in0.trans)
        r[m] = element(m, row, col) | element(m, row, col + 1) << 16;
      else
        r[m] = element(m, col, row) | element(m, col + 1, row) << 16;
    }
  }
}

}  // namespace detail

inline void mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2],
                              const float c[4]) {
  detail::MmaIn in{a, b, c};
  float out[4];
  detail::warp_collective(&detail::mma_m16n8k16_bf16_op, 0xffffffffu, &in, out);
  for (int i = 0; i < 4; ++i) d[i] = out[i];  // d may alias c
}

inline void ldmatrix(uint32_t* r, const void* row, unsigned num, bool trans) {
  detail::LdmatrixIn in{static_cast<const unsigned char*>(row), num, trans};
  uint32_t out[4] = {};
  detail::warp_collective(&detail::ldmatrix_op, 0xffffffffu, &in, out);
  for (unsigned i = 0; i < num; ++i) r[i] = out[i];
}

}  // namespace tda::emu
