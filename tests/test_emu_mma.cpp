// Tensor-core emulation: ldmatrix against its definition, mma.m16n8k16 against a naive GEMM for
// every lane and fragment register, fed both by fragments built in the test and by ldmatrix.
#include <catch2/catch.hpp>

#if __has_include(<cuda_bf16.h>)
#ifndef TDA_CUDA_EMU
#define TDA_CUDA_EMU 1
#endif
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/launch.h"
#include "backend/cuda/mma.h"
#include "test_emu_util.h"

using tda::cuda::launch;
using tda::emu_test::DeviceBuffer;
using tda::emu_test::ScheduleSeed;

namespace {

uint16_t bits_of(__nv_bfloat16 h) {
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
uint32_t pack(__nv_bfloat16 lo, __nv_bfloat16 hi) {
  return static_cast<uint32_t>(bits_of(lo)) | static_cast<uint32_t>(bits_of(hi)) << 16;
}

// --- ldmatrix
// ------------------------------------------------------------------------------------- A 16x16
// matrix of distinct b16 values m[r][c] = 256*r + c in shared memory; lanes address rows as
// ldmatrix_x4 wants (lane l: row l % 16, column block l / 16), giving four 8x8 matrices: 0 = rows
// 0-7/cols 0-7, 1 = rows 8-15/cols 0-7, 2 = rows 0-7/cols 8-15, 3 = rows 8-15/cols 8-15.
__global__ void ldmatrix_kernel(uint32_t* out) {
  __shared__ __align__(16) uint16_t m[16][16];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int i = lane; i < 256; i += 32)
    m[i / 16][i % 16] = static_cast<uint16_t>(256 * (i / 16) + i % 16);
  __syncwarp();
  const void* row = &m[lane % 16][(lane / 16) * 8];
  uint32_t* o = out + (warp * 32 + lane) * 12;
  tda::cuda::ldmatrix_x4(o, row);
  tda::cuda::ldmatrix_x4_trans(o + 4, row);
  tda::cuda::ldmatrix_x2(o + 8, row);
  tda::cuda::ldmatrix_x2_trans(o + 10, row);
}

uint32_t m_value(int r, int c) {
  return static_cast<uint32_t>(256 * r + c);
}

// --- mma with fragments built from the PTX layout, element by element
// ------------------------------ a_i / b_i / c_i numbering of the PTX ISA: register j holds
// elements 2j (low half) and 2j+1.
int a_row(int lane, int i) {
  return (lane >> 2) + ((i < 2 || (i >= 4 && i < 6)) ? 0 : 8);
}
int a_col(int lane, int i) {
  return (lane % 4) * 2 + (i & 1) + (i >= 4 ? 8 : 0);
}
int b_row(int lane, int i) {
  return (lane % 4) * 2 + (i & 1) + (i >= 2 ? 8 : 0);
}
int b_col(int lane) {
  return lane >> 2;
}
int c_row(int lane, int i) {
  return (lane >> 2) + (i >= 2 ? 8 : 0);
}
int c_col(int lane, int i) {
  return (lane % 4) * 2 + (i & 1);
}

struct MmaFragments {
  uint32_t a[32][4];
  uint32_t b[32][2];
  float c[32][4];
};

MmaFragments make_fragments(const std::vector<__nv_bfloat16>& a,
                            const std::vector<__nv_bfloat16>& b, const std::vector<float>& c) {
  MmaFragments f{};
  for (int lane = 0; lane < 32; ++lane) {
    for (int j = 0; j < 4; ++j)
      f.a[lane][j] = pack(a[a_row(lane, 2 * j) * 16 + a_col(lane, 2 * j)],
                          a[a_row(lane, 2 * j + 1) * 16 + a_col(lane, 2 * j + 1)]);
    for (int j = 0; j < 2; ++j)
      f.b[lane][j] = pack(b[b_row(lane, 2 * j) * 8 + b_col(lane)],
                          b[b_row(lane, 2 * j + 1) * 8 + b_col(lane)]);
    for (int i = 0; i < 4; ++i) f.c[lane][i] = c[c_row(lane, i) * 8 + c_col(lane, i)];
  }
  return f;
}

// Two warps, each running its own mma on its own fragments: collectives are per warp.
__global__ void mma_fragments_kernel(const MmaFragments* f, float* d) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const MmaFragments& mine = f[warp];
  float out[4];
  tda::cuda::mma_m16n8k16_bf16(out, mine.a[lane], mine.b[lane], mine.c[lane]);
  for (int i = 0; i < 4; ++i) d[(warp * 32 + lane) * 4 + i] = out[i];
}

// The kernel idiom: A (16x16 row-major) by ldmatrix_x4, B stored k-major ([16][8]) by
// ldmatrix_x2_trans, C loaded from global in the C layout, D written back in the D layout.
__global__ void mma_ldmatrix_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b, const float* c,
                                    float* d) {
  __shared__ __align__(16) __nv_bfloat16 as[16][16];
  __shared__ __align__(16) __nv_bfloat16 bs[16][8];
  const int lane = threadIdx.x;
  for (int i = lane; i < 256; i += 32) as[i / 16][i % 16] = a[i];
  for (int i = lane; i < 128; i += 32) bs[i / 8][i % 8] = b[i];
  __syncwarp();
  uint32_t af[4], bf[2];
  tda::cuda::ldmatrix_x4(af, &as[lane % 16][(lane / 16) * 8]);
  tda::cuda::ldmatrix_x2_trans(bf, &bs[lane % 16][0]);
  const int g = lane / 4, t = lane % 4;
  float acc[4] = {c[g * 8 + 2 * t], c[g * 8 + 2 * t + 1], c[(g + 8) * 8 + 2 * t],
                  c[(g + 8) * 8 + 2 * t + 1]};
  tda::cuda::mma_m16n8k16_bf16(acc, af, bf, acc);
  d[g * 8 + 2 * t] = acc[0];
  d[g * 8 + 2 * t + 1] = acc[1];
  d[(g + 8) * 8 + 2 * t] = acc[2];
  d[(g + 8) * 8 + 2 * t + 1] = acc[3];
}

[[maybe_unused]] const bool kTestKernelsDeclared =
    tda::emu_test::declare_test_kernels<ldmatrix_kernel, mma_fragments_kernel,
                                        mma_ldmatrix_kernel>();

struct Problem {
  std::vector<__nv_bfloat16> a, b;  // a: 16x16 row-major, b: 16x8 row-major (k-major)
  std::vector<float> c;             // 16x8
};

// exact: small integers, so every product and partial sum is exact in fp32 and any summation
// order gives the same bits. Otherwise uniform in [-1, 1).
Problem make_problem(std::mt19937& rng, bool exact) {
  Problem p;
  std::uniform_int_distribution<int> small(-8, 8);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  auto draw = [&] { return exact ? static_cast<float>(small(rng)) : unit(rng); };
  for (int i = 0; i < 256; ++i) p.a.push_back(__float2bfloat16(draw()));
  for (int i = 0; i < 128; ++i) p.b.push_back(__float2bfloat16(draw()));
  for (int i = 0; i < 128; ++i)
    p.c.push_back(exact ? static_cast<float>(small(rng) * 16) : unit(rng));
  return p;
}

// Naive fp32 GEMM in k order, and the exact value in double.
void reference(const Problem& p, std::vector<float>* fp32, std::vector<double>* exact,
               std::vector<double>* magnitude) {
  fp32->assign(128, 0.0f);
  exact->assign(128, 0.0);
  magnitude->assign(128, 0.0);
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n) {
      float acc = p.c[m * 8 + n];
      double e = p.c[m * 8 + n], mag = std::fabs(e);
      for (int k = 0; k < 16; ++k) {
        const float x = __bfloat162float(p.a[m * 16 + k]), y = __bfloat162float(p.b[k * 8 + n]);
        acc += x * y;
        e += static_cast<double>(x) * y;
        mag += std::fabs(static_cast<double>(x) * y);
      }
      (*fp32)[m * 8 + n] = acc;
      (*exact)[m * 8 + n] = e;
      (*magnitude)[m * 8 + n] = mag;
    }
}

// d as a 16x8 matrix from the per-lane D fragments.
std::vector<float> unpack_d(const float* d) {
  std::vector<float> out(128);
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) out[c_row(lane, i) * 8 + c_col(lane, i)] = d[lane * 4 + i];
  return out;
}

void check_against_reference(const Problem& p, const std::vector<float>& d, bool exact) {
  std::vector<float> fp32;
  std::vector<double> ref, mag;
  reference(p, &fp32, &ref, &mag);
  for (int i = 0; i < 128; ++i) {
    if (exact) {
      CHECK(d[i] == fp32[i]);
    } else {
      // bf16 products are exact; only the fp32 summation rounds. 17 terms, each rounding costs
      // at most 2^-24 of the running magnitude: 17 * 2^-24 * sum|terms| bounds any order.
      CHECK(std::fabs(d[i] - ref[i]) <= 17.0 * std::ldexp(mag[i], -24));
      CHECK(std::fabs(d[i] - fp32[i]) <= 17.0 * std::ldexp(mag[i], -24));
    }
  }
}

}  // namespace

TEST_CASE("emu: ldmatrix x4/x2 (.trans) deliver the documented fragment of every lane", "[emu]") {
  DeviceBuffer<uint32_t> out(64 * 12);
  REQUIRE(launch<ldmatrix_kernel>(dim3(1), dim3(64), 0, nullptr, out.get()) == cudaSuccess);
  auto h = out.to_host();
  for (int warp = 0; warp < 2; ++warp)
    for (int lane = 0; lane < 32; ++lane) {
      const uint32_t* o = &h[(warp * 32 + lane) * 12];
      const int r = lane / 4, c = 2 * (lane % 4);
      for (int mat = 0; mat < 4; ++mat) {
        const int r0 = (mat % 2) * 8, c0 = (mat / 2) * 8;  // where matrix `mat` sits in m
        CHECK(o[mat] == (m_value(r0 + r, c0 + c) | m_value(r0 + r, c0 + c + 1) << 16));
        CHECK(o[4 + mat] == (m_value(r0 + c, c0 + r) | m_value(r0 + c + 1, c0 + r) << 16));
        if (mat < 2) {
          CHECK(o[8 + mat] == o[mat]);
          CHECK(o[10 + mat] == o[4 + mat]);
        }
      }
    }
}

TEST_CASE("emu: mma.m16n8k16 bf16 matches a naive GEMM on every lane and register", "[emu]") {
  std::mt19937 rng(1234);
  for (bool exact : {true, false}) {
    Problem p0 = make_problem(rng, exact), p1 = make_problem(rng, exact);
    std::vector<MmaFragments> f = {make_fragments(p0.a, p0.b, p0.c),
                                   make_fragments(p1.a, p1.b, p1.c)};
    DeviceBuffer<MmaFragments> df(f);
    DeviceBuffer<float> d(64 * 4);
    REQUIRE(launch<mma_fragments_kernel>(dim3(1), dim3(64), 0, nullptr, df.get(), d.get()) ==
            cudaSuccess);
    auto h = d.to_host();
    check_against_reference(p0, unpack_d(h.data()), exact);
    check_against_reference(p1, unpack_d(h.data() + 128), exact);
  }
}

TEST_CASE("emu: ldmatrix feeding mma computes A*B+C", "[emu]") {
  std::mt19937 rng(99);
  for (uint64_t seed : {0, 21}) {
    ScheduleSeed guard(seed);
    for (bool exact : {true, false}) {
      Problem p = make_problem(rng, exact);
      DeviceBuffer<__nv_bfloat16> a(p.a), b(p.b);
      DeviceBuffer<float> c(p.c), d(128);
      REQUIRE(launch<mma_ldmatrix_kernel>(dim3(1), dim3(32), 0, nullptr, a.get(), b.get(), c.get(),
                                          d.get()) == cudaSuccess);
      check_against_reference(p, d.to_host(), exact);
    }
  }
}

#endif
