// Deterministic many-block reductions of the CUDA backend (docs/cuda.md): head_row_sum (two
// passes over chunks of (b, t) items, kernels/variant_ops.cu) and column_sum (the second stage
// of the RMSNorm and ReLA-norm weight gradients, kernels/reduce.cu). At odd sizes that span many
// blocks (small chunks, as the d12 shapes have at full size), under the emulator's shuffled block
// orders: the same bits for every order, and the CPU's sums within fp32 (double for head_row_sum)
// rounding. The control: a reduction whose blocks add their partials with float atomics gives
// different bits under some shuffled order, so "the same bits for every order" has teeth.
#include <catch2/catch.hpp>

#include "test_cuda_util.h"

using namespace tda;
using namespace tda::cuda_test;

namespace {

constexpr int kAtomicBlocks = 64, kAtomicPer = 40;

// Block b adds the sum of its kAtomicPer values to *out with a float atomic: the result depends
// on the order the blocks run in.
__global__ void atomic_block_sum_kernel(float* out, const float* x) {
  if (threadIdx.x != 0) return;
  float s = 0.f;
  for (int i = 0; i < kAtomicPer; ++i) s += x[blockIdx.x * kAtomicPer + i];
  atomicAdd(out, s);
}
[[maybe_unused]] const bool kTestKernelsDeclared =
    emu_test::declare_test_kernels<atomic_block_sum_kernel>();

const uint64_t kSeeds[] = {0, 1, 2, 3, 4, 5};

}  // namespace

TEST_CASE("cuda reduce: the shuffled block order exposes an order-dependent reduction",
          "[cuda][emu][reduce]") {
  std::vector<float> x(size_t(kAtomicBlocks) * kAtomicPer);
  auto r = rnd(x.size(), 90);
  for (size_t i = 0; i < x.size(); ++i) x[i] = r[i] * std::pow(10.f, float(i % 7) - 3.f);
  std::vector<float> first;
  int differ = 0;
  for (uint64_t seed : kSeeds) {
    ScheduleSeed s(seed);
    DeviceBuffer<float> gx(x), out(std::vector<float>{0.f});
    REQUIRE(cuda::launch<atomic_block_sum_kernel>(dim3(kAtomicBlocks), dim3(32), 0, nullptr,
                                                  out.get(), gx.get()) == cudaSuccess);
    if (first.empty())
      first = out.to_host();
    else
      differ += !same_bits(out.to_host(), first);
  }
  CHECK(differ > 0);
}

TEST_CASE("cuda reduce: head_row_sum over many blocks is the CPU's sum, order-independent",
          "[cuda][emu][reduce]") {
  CpuOps cpu;
  const int B = 3, H = 5, T = 131;  // 393 items per head
  const auto x = rnd(size_t(B) * H * T, 91), w = rnd(size_t(T), 92), d0 = rnd(size_t(H), 93);
  for (int per : {37, 4096}) {  // 11 chunks of 37 items (the last one short), or one chunk
    for (bool weighted : {false, true}) {
      INFO("items per block " << per << " weighted " << weighted);
      auto ref = d0;
      cpu.head_row_sum(ref.data(), x.data(), weighted ? w.data() : nullptr, -0.7f, B, H, T);
      std::vector<float> first;
      for (uint64_t seed : kSeeds) {
        ScheduleSeed s(seed);
        DeviceBuffer<float> gx(x), gw(w), gd(d0);
        DeviceBuffer<double> scratch(cuda::head_row_sum_scratch(B, H, T, per));
        cuda::head_row_sum(gd.get(), gx.get(), weighted ? gw.get() : nullptr, -0.7f, B, H, T,
                           scratch.get(), per);
        CHECK(rel_err(gd.to_host(), ref) < 1e-6);
        if (first.empty())
          first = gd.to_host();
        else
          CHECK(same_bits(gd.to_host(), first));
      }
    }
  }
  // H = 1 with every (batch, head) row folded into B, as TDA's lambda and the Diff kinds' sum
  // call it: 1,003 x 17 items into one value over 461 chunks of 37.
  const int rows = 1003, len = 17;
  const auto y = rnd(size_t(rows) * len, 94);
  std::vector<float> ref = {0.25f};
  cpu.head_row_sum(ref.data(), y.data(), nullptr, 1.f, rows, 1, len);
  REQUIRE(cuda::head_row_sum_scratch(rows, 1, len, 37) == 461);
  std::vector<float> first;
  for (uint64_t seed : kSeeds) {
    ScheduleSeed s(seed);
    DeviceBuffer<float> gy(y), gd(std::vector<float>{0.25f});
    DeviceBuffer<double> scratch(cuda::head_row_sum_scratch(rows, 1, len, 37));
    cuda::head_row_sum(gd.get(), gy.get(), nullptr, 1.f, rows, 1, len, scratch.get(), 37);
    CHECK(rel_err(gd.to_host(), ref) < 1e-6);
    if (first.empty())
      first = gd.to_host();
    else
      CHECK(same_bits(gd.to_host(), first));
  }
}

TEST_CASE("cuda reduce: column_sum over many row groups matches a double sum, order-independent",
          "[cuda][emu][reduce]") {
  // 9,001 rows (251 groups of 36 rows, then 251 group sums per column) of C = 45 columns (two
  // column tiles, the second partial) inside rows of 50 (a row stride past C).
  const int rows = 9001, C = 45;
  const size_t ld = 50;
  const auto in = rnd(size_t(rows) * ld, 95), out0 = rnd(size_t(C), 96);
  std::vector<float> ref(out0.size());
  for (int c = 0; c < C; ++c) {
    double s = 0.0;
    for (int r = 0; r < rows; ++r) s += in[size_t(r) * ld + c];
    ref[size_t(c)] = float(double(out0[size_t(c)]) + s);
  }
  std::vector<float> first;
  for (uint64_t seed : kSeeds) {
    ScheduleSeed s(seed);
    DeviceBuffer<float> gin(in), gout(out0), scratch(cuda::column_sum_scratch(rows, C));
    cuda::column_sum(gout.get(), gin.get(), rows, C, ld, scratch.get());
    CHECK(rel_err(gout.to_host(), ref) < 1e-5);
    if (first.empty())
      first = gout.to_host();
    else
      CHECK(same_bits(gout.to_host(), first));
  }
}
