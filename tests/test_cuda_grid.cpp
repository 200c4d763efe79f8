// Grids that grow with the batch (src/backend/cuda/grid.h): a micro-batch may hold B*T = 2^22
// tokens, and a launch fails on a GPU when grid.y or grid.z passes 65,535 (x: 2^31 - 1). The
// emulator enforces the same limits at launch, so the fixed ops run here past the old limit
// (RMSNorm's dw and the ReLA norm's dgamma/dw put one block per chunk of rows on grid.y), with a
// forced small chunk so the run stays cheap; the shapes at 2^22 tokens, which no emulated run
// reaches, are checked as launch configurations.
#include <catch2/catch.hpp>
#include <set>
#include <utility>

#include "test_cuda_util.h"
// after test_cuda_util.h (emulated build)
#include "backend/cuda/attention_tc.cuh"
#include "backend/cuda/grid.h"

using namespace tda;
using namespace tda::cuda_test;

namespace {

constexpr size_t kTokens = size_t(1) << 22;  // the largest micro-batch to support

// Block -> (b*h, first row) as the tiled attention kernels decode it; bh -1: a padding block.
__global__ void tile_decode_kernel(AttnArgs a, int2* out) {
  size_t bh;
  const bool live = cuda::fa::block_bh(a, &bh);
  const size_t block = (size_t(blockIdx.z) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  out[block] = int2{live ? int(bh) : -1, int(blockIdx.x) * cuda::fa::kTile};
}
[[maybe_unused]] const bool kTestKernelsDeclared =
    emu_test::declare_test_kernels<tile_decode_kernel>();

}  // namespace

TEST_CASE("cuda grids: batch-sized launches fit the device limits at 2^22 tokens", "[cuda][grid]") {
  const int kChunk = 32;  // kRmsnormDwRows, kRelaNormChunkRows
  // RMSNorm over the TRA/TDA head norm's rows (B*T*H, D = 64) and over the stream (B*T, 768);
  // the ReLA norm over B*T tokens of 768.
  for (const auto& [rows, C] : {std::pair<size_t, size_t>{kTokens * 12, 64}, {kTokens, 768}}) {
    const size_t chunks = (rows + kChunk - 1) / kChunk;
    INFO(rows << " rows of " << C);
    const dim3 g = cuda::chunk_column_grid(chunks, C, 128, "test");
    CHECK(cuda::grid_fits(g));
    CHECK(size_t(g.x) == chunks);
    // The old shape, (column blocks, chunks): over the limit, the bug this fixes.
    CHECK_FALSE(cuda::grid_fits(dim3(g.y, unsigned(chunks))));
  }
  // Attention: long T with few heads, short T with many sequences (B*H past 65,535).
  for (const auto& [T, BH] :
       {std::pair<int, size_t>{int(kTokens), 12}, {64, kTokens / 64 * 12}, {1, kTokens * 12}}) {
    INFO("T " << T << " B*H " << BH);
    const dim3 g = cuda::attention_tile_grid(T, BH, cuda::fa::kTile, "test");
    CHECK(cuda::grid_fits(g));
    CHECK(size_t(g.x) == (size_t(T) + 63) / 64);
    // (y, z) cover B*H with fewer than z padding rows of blocks
    CHECK(size_t(g.y) * g.z >= BH);
    CHECK(size_t(g.y) * g.z - BH < g.z);
  }
  CHECK(cuda::attention_tile_grid(1000, 4000, 64, "test").z == 1);     // small: the plain 2-D grid
  CHECK_FALSE(cuda::grid_fits(dim3(1, unsigned(kTokens / 64 * 12))));  // the old (tiles, B*H)
  // Past even (y, z): a one-line error naming the kernel, not a failed launch.
  CHECK_THROWS_WITH(cuda::attention_tile_grid(64, size_t(1) << 32, 64, "attention_forward"),
                    Catch::Contains("attention_forward") && Catch::Contains("exceed"));
}

TEST_CASE("cuda grids: the attention kernels' grid visits every (b*h, tile) once past 65,535",
          "[cuda][grid][emu]") {
  // B*H = 70,001 > 65,535 with T = 100 (two tiles, the second partial): a (2, 35,001, 2) grid of
  // one-thread blocks, two of them padding. Cheap under the emulator, where a (tiles, B*H) grid
  // would have failed to launch.
  AttnArgs a;
  a.B = 70001;
  a.H = 1;
  a.T = 100;
  const dim3 g = cuda::attention_tile_grid(a.T, size_t(a.B) * a.H, cuda::fa::kTile, "test");
  REQUIRE((g.x == 2 && g.y == 35001 && g.z == 2));
  const size_t blocks = size_t(g.x) * g.y * g.z;
  DeviceBuffer<int2> out(blocks);
  REQUIRE(cuda::launch<tile_decode_kernel>(g, dim3(1), 0, nullptr, a, out.get()) == cudaSuccess);
  const std::vector<int2> got = out.to_host();
  std::set<std::pair<int, int>> seen;
  size_t padding = 0;
  for (const int2& b : got) {
    if (b.x < 0) {
      ++padding;
      continue;
    }
    seen.insert({b.x, b.y});
  }
  CHECK(padding == 2);
  CHECK(seen.size() == 2 * size_t(a.B));  // every (b*h, tile) exactly once
  CHECK(seen.begin()->first == 0);
  CHECK(seen.rbegin()->first == a.B - 1);
}

TEST_CASE("cuda grids: RMSNorm dw and ReLA-norm dgamma/dw past 65,535 row chunks match the CPU",
          "[cuda][grid][emu]") {
  // Chunks of one row make N = 65,600 rows 65,600 chunks (the default 32-row chunks reach that at
  // N = 2.1M, too slow to emulate): RMSNorm's whole backward (one block per chunk), the ReLA
  // norm's reduction stages alone (its row-wise du kernel puts rows on x and is unchanged). C = 5:
  // one partial warp of columns. Both sides fp32; the CUDA side sums chunk partials in order, so
  // the error is a few ulps of the scale (the 1e-5 of test_cuda_variant_ops.cpp).
  CpuOps cpu;
  CudaOps gpu;
  const int N = 65600, C = 5, kChunk = 1;
  REQUIRE(N / kChunk > 65535);
  const auto x = rnd(size_t(N) * C, 1), dy = rnd(size_t(N) * C, 2), w = rnd(C, 3, 0.5f, 1.5f);
  const DeviceBuffer<float> gx(x), gdy(dy);
  {
    std::vector<float> y(x.size()), rstd(N), dx(x.size(), 0.f), dw(C, 0.f);
    cpu.rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
    cpu.rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), rstd.data(), N, C);
    DeviceBuffer<float> grstd(rstd), gw(w), gdx(std::vector<float>(x.size(), 0.f)),
        gdw(std::vector<float>(C, 0.f)), scratch(cuda::rmsnorm_backward_scratch(N, C, kChunk));
    cuda::rmsnorm_backward(gdx.get(), gdw.get(), gdy.get(), gx.get(), gw.get(), grstd.get(), N, C,
                           scratch.get(), nullptr, kChunk);
    CHECK(rel_err(gdw.to_host(), dw) < 1e-5);
    CHECK(rel_err(gdx.to_host(), dx) < 1e-5);
  }
  {
    // The gated norm: both dgamma and dw (the centred one shares the kernels, without dw).
    const auto gamma = rnd(C, 4, 0.5f, 1.5f), gate = rnd(C, 5);
    std::vector<float> y(x.size()), r(N), mu(N), du(x.size()), dgamma(C, 0.f), dgw(C, 0.f);
    cpu.rela_norm_forward(y.data(), r.data(), mu.data(), x.data(), gamma.data(), gate.data(), N, C,
                          1e-5f, false);
    cpu.rela_norm_backward(du.data(), dgamma.data(), dgw.data(), dy.data(), x.data(), r.data(),
                           mu.data(), gamma.data(), gate.data(), N, C, false);
    DeviceBuffer<float> gr(r), gmu(mu), ggamma(gamma), ggate(gate), gdg(std::vector<float>(C, 0.f)),
        gdw(std::vector<float>(C, 0.f)), scratch(cuda::rela_norm_backward_scratch(N, C, kChunk));
    cuda::rela_norm_backward_dparams(gdg.get(), gdw.get(), gdy.get(), gx.get(), gr.get(), gmu.get(),
                                     ggamma.get(), ggate.get(), N, C, scratch.get(), kChunk);
    CHECK(rel_err(gdg.to_host(), dgamma) < 1e-5);
    CHECK(rel_err(gdw.to_host(), dgw) < 1e-5);
  }
}
