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
using tda::emu_test::ResetDeviceAtExit;
using tda::emu_test::ScheduleSeed;
using tda::emu_test::StrictMode;

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

namespace {
namespace st = tda::cuda::selftest;
// The column sums of a (rows x 64) matrix of small integers (exact in any order), computed by the
// cp.async pipeline with one step of its protocol skipped (or none), and whether they are right.
bool pipeline_right(int rows, st::PipeSkip skip, uint64_t seed) {
  std::vector<float> x(size_t(rows) * st::kPipeCols), ref(st::kPipeCols, 0.f);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < st::kPipeCols; ++c) {
      x[size_t(r) * st::kPipeCols + c] = float((r * 7 + c * 3) % 11 + 1);
      ref[c] += x[size_t(r) * st::kPipeCols + c];
    }
  ScheduleSeed guard(seed);
  DeviceBuffer<float> dx(x), out(st::kPipeCols);
  REQUIRE(st::pipelined_column_sums(dx.get(), out.get(), rows, skip, nullptr) == cudaSuccess);
  return out.to_host() == ref;
}
}  // namespace

// The emulator's cp.async lands a copy at its wait (in order) or at issue or its wait (shuffled),
// emu/async_copy.h: the correct pipeline is right under every schedule, and each missing step of
// the protocol gives a wrong sum under the schedule that can expose it, as a GPU may.
TEST_CASE("emu: cp.async double buffering is right only with every wait and barrier", "[emu]") {
  for (int rows : {16, 70, 160})  // one tile; a zero-filled partial last tile; ten tiles
    for (uint64_t seed : {0, 1, 2, 3, 7}) {
      INFO("rows " << rows << ", seed " << seed);
      CHECK(pipeline_right(rows, st::kSkipNothing, seed));
    }
  // Nothing waited for: the in-order schedule never lands the copies.
  CHECK_FALSE(pipeline_right(70, st::kSkipWait, 0));
  // Each thread waits for its own copies but reads rows that other threads copied.
  CHECK_FALSE(pipeline_right(70, st::kSkipBarrierAfterWait, 0));
  // A buffer refilled while other threads still read it: only a copy that lands early shows it.
  CHECK(pipeline_right(160, st::kSkipBarrierBeforeRefill, 0));
  int wrong = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed)
    wrong += !pipeline_right(160, st::kSkipBarrierBeforeRefill, seed);
  CHECK(wrong == 8);
}

TEST_CASE("emu: cp.async refuses a misaligned or out-of-range source", "[emu][strict]") {
  StrictMode strict;
  for (bool misaligned : {true, false}) {
    ResetDeviceAtExit reset;  // a kernel fault is sticky until the reset (which frees x and out)
    DeviceBuffer<float> x(64 * 16), out(64);
    // Misaligned: x + 1. Out of range: 17 rows of a 16-row allocation.
    CHECK(st::pipelined_column_sums(x.get() + (misaligned ? 1 : 0), out.get(), misaligned ? 16 : 17,
                                    st::kSkipNothing, nullptr) != cudaSuccess);
    if (misaligned)
      CHECK_THAT(tda::emu::last_error_message(),
                 Catch::Contains("16-byte aligned") && Catch::Contains("pipelined_column_sums"));
    else
      CHECK_THAT(tda::emu::last_error_message(),
                 Catch::Contains("cp.async source") && Catch::Contains("past the end"));
  }
}

// A zero-filled copy reads 0 bytes, but its address must still be the allocation's
// (emu/async_copy.h): 20 rows of a 20-row allocation leave 12 zero-filled rows in the second tile.
TEST_CASE("emu: a zero-filled cp.async must still address its allocation", "[emu][strict]") {
  StrictMode strict;
  for (bool clamp : {true, false}) {
    ResetDeviceAtExit reset;
    DeviceBuffer<float> x(20 * 64), out(64);
    std::vector<float> ones(20 * 64, 1.f), sums(64);
    REQUIRE(cudaMemcpy(x.get(), ones.data(), ones.size() * sizeof(float), cudaMemcpyHostToDevice) ==
            cudaSuccess);
    const cudaError_t err = st::pipelined_column_sums(
        x.get(), out.get(), 20, clamp ? st::kSkipNothing : st::kSkipZeroFillClamp, nullptr);
    if (clamp) {
      REQUIRE(err == cudaSuccess);
      REQUIRE(cudaMemcpy(sums.data(), out.get(), 64 * sizeof(float), cudaMemcpyDeviceToHost) ==
              cudaSuccess);
      CHECK(sums[0] == 20.f);
      CHECK(sums[63] == 20.f);
    } else {
      CHECK(err != cudaSuccess);  // the address is past the allocation (or any)
      CHECK_THAT(tda::emu::last_error_message(),
                 Catch::Contains("cp.async source") && Catch::Contains("pipelined_column_sums"));
    }
  }
}
#endif
