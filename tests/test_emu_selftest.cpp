// kernels/emu_selftest.cu, the file scripts/build_cuda.sh compiles with nvcc, compiled here by
// the host compiler and run on the emulator: one source proven under both compilers.
#include <catch2/catch.hpp>

#if __has_include(<cuda_bf16.h>)
#ifndef TDA_CUDA_EMU
#define TDA_CUDA_EMU 1
#endif
#include <cmath>
#include <random>
#include <vector>

#include "../kernels/emu_selftest.cu"
#include "test_emu_util.h"

using tda::emu_test::DeviceBuffer;
using tda::emu_test::ScheduleSeed;

TEST_CASE("emu: kernels/emu_selftest.cu block_sum runs on the emulator", "[emu]") {
  const int n = 5000;
  std::vector<float> x(n);
  double ref = 0.0;
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 17) - 8.0f;  // integers: the sum is exact in any order
    ref += x[i];
  }
  for (uint64_t seed : {0, 7}) {
    ScheduleSeed guard(seed);
    DeviceBuffer<float> dx(x), out(std::vector<float>{0.0f});
    REQUIRE(tda::cuda::selftest::block_sum(dx.get(), out.get(), n, 3, nullptr) == cudaSuccess);
    CHECK(out.to_host()[0] == static_cast<float>(ref));
  }
}

TEST_CASE("emu: kernels/emu_selftest.cu gemm_bf16 matches a naive GEMM", "[emu]") {
  const int m = 32, n = 24, k = 48;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<__nv_bfloat16> a(m * k), w(n * k);
  for (auto& v : a) v = __float2bfloat16(unit(rng));
  for (auto& v : w) v = __float2bfloat16(unit(rng));
  DeviceBuffer<__nv_bfloat16> da(a), dw(w);
  DeviceBuffer<float> dc(m * n);
  REQUIRE(tda::cuda::selftest::gemm_bf16(da.get(), dw.get(), dc.get(), m, n, k, nullptr) ==
          cudaSuccess);
  auto c = dc.to_host();
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double ref = 0.0, mag = 0.0;
      for (int kk = 0; kk < k; ++kk) {
        const double p =
            static_cast<double>(__bfloat162float(a[i * k + kk])) * __bfloat162float(w[j * k + kk]);
        ref += p;
        mag += std::fabs(p);
      }
      // Exact bf16 products; fp32 rounding once per mma (3 k-steps) plus the accumulator adds.
      CHECK(std::fabs(c[i * n + j] - ref) <= 8.0 * std::ldexp(mag, -24));
    }
}

#endif
