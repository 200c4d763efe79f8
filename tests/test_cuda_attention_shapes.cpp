// The CUDA forward's block shapes (AttnArgs::fwd_block_rows, docs/cuda.md): 128 query rows per
// block (each warp 32 rows, FlashAttention-2's forward warp tile) computes every row exactly as
// the 64-row shape does (the same key tiles in the same order, the same products per row), so its
// outputs and saved statistics must be the same bits; the 64-row shape is held to the CPU by
// test_cuda_attention.cpp. Calls that count survivors or tiles, two-view kinds and head dims past
// 64 keep 64 rows (attn_forward_block_rows), and the launch says which kernel ran.
#include <catch2/catch.hpp>

#include "backend/cuda/emu/dry_run.h"
#include "test_cuda_attention_util.h"

using namespace tda;
using namespace tda::cuda_test;

namespace {
AttnProblem forward_problem(AttnMath m, int T, int D, uint32_t seed, int rows) {
  AttnProblem p;
  p.math = m;
  p.T = T;
  p.Dqk = p.Dv = D;
  p.power = 2;
  p.fill(seed);
  p.counts = false;
  p.backward = false;
  p.fwd_block_rows = rows;
  return p;
}

// The forward kernel of the latest launch, and its grid's x (query blocks).
std::string last_kernel(unsigned* grid_x) {
  const emu::Counters c = emu::counters();
  *grid_x = c.last.grid.x;
  return c.last.kernel ? *c.last.kernel : std::string();
}

}  // namespace

TEST_CASE("cuda attention: 128-row forward blocks give the 64-row forward's bits", "[cuda][emu]") {
  struct Case {
    AttnMath math;
    int power;
    bool bisect;
  };
  const Case cases[] = {{AttnMath::kSoftmax, 2, false},   {AttnMath::kSoftplus, 2, false},
                        {AttnMath::kRelu, 1, false},      {AttnMath::kThreshold, 2, false},
                        {AttnMath::kThreshold, 1, false}, {AttnMath::kThreshold, 3, false},
                        {AttnMath::kEntmax, 2, false},    {AttnMath::kEntmax, 2, true}};
  // T: inside one block, a second half that is partly and wholly past T, several blocks
  for (int T : {17, 100, 130, 200, 257}) {
    for (const Case& c : cases) {
      INFO("math " << attn_math_name(c.math) << " p " << c.power << " bisect " << c.bisect << " T "
                   << T);
      AttnProblem narrow = forward_problem(c.math, T, 64, 1000 + T, 64);
      narrow.power = c.power;
      narrow.bisect = c.bisect;
      AttnProblem wide = narrow;
      wide.fwd_block_rows = 128;
      CudaOps gpu;
      const Outputs a = run_attention(gpu, narrow);
      unsigned gx = 0;
      CHECK(last_kernel(&gx).find("fa_forward_kernel") != std::string::npos);
      CHECK(gx == unsigned((T + 63) / 64));
      const Outputs b = run_attention(gpu, wide);
      const std::string k = last_kernel(&gx);
      CHECK(k.find("fa_forward_kernel") != std::string::npos);
      CHECK(k.find(", false, 2>") != std::string::npos);  // kCount false, two row tiles
      CHECK(gx == unsigned((T + 127) / 128));
      for (const char* key : {"out", "stats"}) {
        if (!a.count(key)) continue;
        INFO(key);
        CHECK(same_bits(b.at(key), a.at(key)));
      }
    }
  }
}

TEST_CASE("cuda attention: 128-row forward blocks with q_start and a query row scale",
          "[cuda][emu]") {
  for (int qs : {70, 129, 200}) {
    AttnProblem narrow = forward_problem(AttnMath::kSoftmax, 257, 64, 77, 64);
    narrow.q_start = qs;
    narrow.q_scale.resize(size_t(narrow.H) * narrow.T);
    for (size_t i = 0; i < narrow.q_scale.size(); ++i) narrow.q_scale[i] = 0.5f + 0.01f * (i % 97);
    narrow.q_scale_h_stride = narrow.T;
    AttnProblem wide = narrow;
    wide.fwd_block_rows = 128;
    CudaOps gpu;
    INFO("q_start " << qs);
    CHECK(same_bits(run_attention(gpu, wide).at("out"), run_attention(gpu, narrow).at("out")));
  }
}

TEST_CASE("cuda attention: calls a 128-row forward cannot serve run 64-row blocks", "[cuda][emu]") {
  unsigned gx = 0;
  CudaOps gpu;
  // two views, head dim 128, and a call that counts survivors and tiles
  AttnProblem two = forward_problem(AttnMath::kDiffThreshold, 130, 64, 5, 128);
  two.lambda = 0.4f;
  run_attention(gpu, two);
  CHECK(last_kernel(&gx).find(", 1>") != std::string::npos);
  CHECK(gx == 3u);
  run_attention(gpu, forward_problem(AttnMath::kSoftmax, 130, 128, 6, 128));
  CHECK(last_kernel(&gx).find(", 1>") != std::string::npos);
  AttnProblem counted = forward_problem(AttnMath::kThreshold, 130, 64, 7, 128);
  counted.counts = true;
  run_attention(gpu, counted);
  CHECK(last_kernel(&gx).find(", true, 1>") != std::string::npos);
  CHECK(gx == 3u);
  // the rule the kernels follow, as bench attention reports it
  AttnArgs a;
  a.math = AttnMath::kThreshold;
  a.Dqk = a.Dv = 64;
  a.fwd_block_rows = 128;
  CHECK(attn_forward_block_rows(a) == 128);
  a.fwd_block_rows = 0;
  CHECK(attn_forward_block_rows(a) == 64);
  a.fwd_block_rows = 128;
  a.math = AttnMath::kDiffThreshold;
  CHECK(attn_forward_block_rows(a) == 64);
}
