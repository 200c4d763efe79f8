// The CUDA forward's block shapes (AttnArgs::fwd_block_rows, fwd_block_keys; docs/cuda.md) against
// the 64 x 64 shape, which test_cuda_attention.cpp holds to the CPU:
//  * 128 x 64 (each warp 32 query rows, FlashAttention-2's forward warp tile) computes every row
//    exactly as 64 x 64 does (the same key tiles in the same order, the same products per row):
//    the same bits.
//  * 64 x 128 (key tiles of 128) adds each row's products in the same order too (the W.V mma
//    runs over the tile's keys 16 at a time, as over two tiles of 64): the same bits for every
//    kind without an online max. Softmax rescales its running max once per tile, so its weights
//    are rounded to bf16 against another max: within the CPU bound of test_cuda_attention.cpp.
// Calls that count survivors or tiles, head dims past 64 and the shapes a kind's registers do not
// allow keep 64 x 64 (attn_forward_shape), and the launch says which kernel ran.
#include <algorithm>
#include <catch2/catch.hpp>

#include "backend/cuda/emu/dry_run.h"
#include "test_cuda_attention_util.h"
#include "test_emu_util.h"  // after the CUDA headers

using namespace tda;
using namespace tda::cuda_test;

namespace {
AttnProblem forward_problem(AttnMath m, int T, int D, uint32_t seed, int rows, int keys = 0) {
  AttnProblem p;
  p.math = m;
  p.T = T;
  p.Dqk = p.Dv = D;
  p.power = 2;
  if (attn_two_views(m)) p.lambda = 0.4f;
  p.fill(seed);
  p.counts = false;
  p.backward = false;
  p.fwd_block_rows = rows;
  p.fwd_block_keys = keys;
  return p;
}

// The forward kernel of the latest launch, and its grid's x (query blocks).
std::string last_kernel(unsigned* grid_x) {
  const emu::Counters c = emu::counters();
  *grid_x = c.last.grid.x;
  return c.last.kernel ? *c.last.kernel : std::string();
}

// The shapes beside 64 x 64, as AttnArgs asks for them, and the end of the kernel instance each
// launches (fa_forward_kernel<..., kCount, kRT, kBN>).
struct Shape {
  int rows, keys;
  const char* instance;
};
constexpr Shape kShapes[] = {{128, 0, ", false, 2, 64>"}, {0, 128, ", false, 1, 128>"}};

// A backward problem of the tests below: one kind's math, its head dims and layout, T.
struct BackwardCase {
  AttnMath math;
  int power, Dqk, Dv;
  bool diff_layout, drop;
  float alpha = 1.5f;  // entmax (bisection where not 1.5)
  bool no_skip = false;
};
AttnProblem backward_problem(const BackwardCase& c, int T, uint32_t seed) {
  AttnProblem p;
  p.math = c.math;
  p.T = T;
  p.Dqk = c.Dqk;
  p.Dv = c.Dv;
  p.power = c.power;
  p.lambda = 0.4f;
  p.diff_layout = c.diff_layout;
  p.drop = c.drop;
  p.no_skip = c.no_skip;
  p.alpha = c.alpha;
  p.bisect = c.alpha != 1.5f;
  p.counts = false;
  p.fill(seed);
  return p;
}

}  // namespace

TEST_CASE("cuda attention: every forward block shape gives the 64 x 64 forward's bits",
          "[cuda][emu]") {
  struct Case {
    AttnMath math;
    int power;
    bool bisect;
  };
  const Case one_view[] = {{AttnMath::kSoftmax, 2, false},   {AttnMath::kSoftplus, 2, false},
                           {AttnMath::kRelu, 1, false},      {AttnMath::kThreshold, 2, false},
                           {AttnMath::kThreshold, 1, false}, {AttnMath::kThreshold, 3, false},
                           {AttnMath::kEntmax, 2, false},    {AttnMath::kEntmax, 2, true}};
  // 64 x 128 also serves the one-accumulator two-view kinds (tda, diff_rela at Dv 64)
  const Case two_view[] = {{AttnMath::kDiffThreshold, 2, false},
                           {AttnMath::kDiffThreshold, 1, false},
                           {AttnMath::kDiffRelu, 1, false}};
  for (const Shape& shape : kShapes) {
    std::vector<Case> cases(std::begin(one_view), std::end(one_view));
    if (shape.keys == 128) cases.insert(cases.end(), std::begin(two_view), std::end(two_view));
    const unsigned block_rows = shape.rows ? unsigned(shape.rows) : 64u;
    // T: inside one block, a block (or key tile) partly and wholly past T, several blocks, an
    // odd block count (64 x 128: the diagonal tile starting 64 rows before the block)
    for (int T : {17, 100, 130, 200, 257}) {
      for (const Case& c : cases) {
        INFO("shape " << shape.rows << " x " << shape.keys << " math " << attn_math_name(c.math)
                      << " p " << c.power << " bisect " << c.bisect << " T " << T);
        AttnProblem base = forward_problem(c.math, T, 64, 1000 + T, 0);
        base.power = c.power;
        base.bisect = c.bisect;
        AttnProblem other = base;
        other.fwd_block_rows = shape.rows;
        other.fwd_block_keys = shape.keys;
        CudaOps gpu;
        const Outputs a = run_attention(gpu, base);
        unsigned gx = 0;
        CHECK(last_kernel(&gx).find(", false, 1, 64>") != std::string::npos);
        CHECK(gx == unsigned((T + 63) / 64));
        const Outputs b = run_attention(gpu, other);
        const std::string k = last_kernel(&gx);
        CHECK(k.find("fa_forward_kernel") != std::string::npos);
        CHECK(k.find(shape.instance) != std::string::npos);
        CHECK(gx == (unsigned(T) + block_rows - 1) / block_rows);
        for (const char* key : {"out", "stats"}) {
          if (!a.count(key)) continue;
          INFO(key);
          if (c.math == AttnMath::kSoftmax && shape.keys == 128) {
            CpuOps cpu;
            CHECK(rel_err(b.at(key), run_attention(cpu, rounded(base)).at(key)) < 1e-2);
            CHECK(rel_err(b.at(key), a.at(key)) < 1e-2);
          } else {
            CHECK(same_bits(b.at(key), a.at(key)));
          }
        }
      }
    }
  }
}

TEST_CASE("cuda attention: every forward block shape with q_start and a query row scale",
          "[cuda][emu]") {
  for (const Shape& shape : kShapes)
    for (AttnMath m : {AttnMath::kSoftplus, AttnMath::kSoftmax})
      for (int qs : {70, 129, 200}) {
        AttnProblem base = forward_problem(m, 257, 64, 77, 0);
        base.q_start = qs;
        base.q_scale.resize(size_t(base.H) * base.T);
        for (size_t i = 0; i < base.q_scale.size(); ++i) base.q_scale[i] = 0.5f + 0.01f * (i % 97);
        base.q_scale_h_stride = base.T;
        AttnProblem other = base;
        other.fwd_block_rows = shape.rows;
        other.fwd_block_keys = shape.keys;
        CudaOps gpu;
        INFO("shape " << shape.rows << " x " << shape.keys << " math " << attn_math_name(m)
                      << " q_start " << qs);
        const std::vector<float> a = run_attention(gpu, base).at("out"),
                                 b = run_attention(gpu, other).at("out");
        if (m == AttnMath::kSoftmax && shape.keys == 128) {
          CHECK(rel_err(b, a) < 1e-2);
          // the rows below q_start are 0 at every shape
          CHECK(std::all_of(b.begin(), b.begin() + size_t(qs) * base.Dv,
                            [](float x) { return x == 0.f; }));
        } else {
          CHECK(same_bits(b, a));
        }
      }
}

TEST_CASE("cuda attention: calls a forward shape cannot serve run 64 x 64 blocks", "[cuda][emu]") {
  unsigned gx = 0;
  CudaOps gpu;
  // 128 rows: two views; 128 keys: diff softmax (two accumulators); both: head dim 128, and a
  // call that counts survivors and tiles
  run_attention(gpu, forward_problem(AttnMath::kDiffThreshold, 130, 64, 5, 128));
  CHECK(last_kernel(&gx).find(", 1, 64>") != std::string::npos);
  CHECK(gx == 3u);
  run_attention(gpu, forward_problem(AttnMath::kDiffSoftmax, 130, 64, 5, 0, 128));
  CHECK(last_kernel(&gx).find(", 1, 64>") != std::string::npos);
  for (const Shape& shape : kShapes) {
    run_attention(gpu, forward_problem(AttnMath::kSoftmax, 130, 128, 6, shape.rows, shape.keys));
    CHECK(last_kernel(&gx).find(", 1, 64>") != std::string::npos);
    AttnProblem counted = forward_problem(AttnMath::kThreshold, 130, 64, 7, shape.rows, shape.keys);
    counted.counts = true;
    run_attention(gpu, counted);
    CHECK(last_kernel(&gx).find(", true, 1, 64>") != std::string::npos);
    CHECK(gx == 3u);
  }
  // the rule the kernels follow, as bench attention reports it
  AttnArgs a;
  a.math = AttnMath::kThreshold;
  a.Dqk = a.Dv = 64;
  auto is = [&](int rows, int keys) {
    const AttnFwdShape s = attn_forward_shape(a);
    return s.rows == rows && s.keys == keys;
  };
  CHECK(is(64, 64));
  a.fwd_block_rows = 128;
  CHECK(is(128, 64));
  a.fwd_block_rows = 0;
  a.fwd_block_keys = 128;
  CHECK(is(64, 128));
  a.math = AttnMath::kDiffThreshold;
  CHECK(is(64, 128));
  a.fwd_block_keys = 0;
  a.fwd_block_rows = 128;
  CHECK(is(64, 64));
  a.math = AttnMath::kDiffSoftmax;
  a.fwd_block_rows = 0;
  a.fwd_block_keys = 128;
  CHECK(is(64, 64));
  a.math = AttnMath::kSoftmax;
  a.Dv = 128;
  CHECK(is(64, 64));
}

// attention.deterministic false (AttnArgs::atomic_dq): FlashAttention-2's backward, one kernel
// that adds dq and the row gradients by atomics. The dk/dv kernel's own outputs (dk, dv, dk2) are
// its split instance's code and must be the same bits; dq (dq2), drow_tau and drow_lambda are the
// same products summed in another order (per key tile, then across tiles), held to the split's,
// which test_cuda_attention.cpp holds to the CPU, at 2e-5 of the tensor's scale (fp32 reordering
// over <= 5 key tiles). The gradient buffers start as NaN: an element neither zeroed nor written
// shows. Every kind's math, one- and two-view layouts, T inside one tile and across a partial one,
// and the drop-term negative control (whose ds and drow_tau carry other scales). Entmax at alpha
// 1.5 runs it with Entmax15Policy (the split kernels with the any-alpha policy): dk and dv the same
// bits show the two policies agree. Calls it does not serve (attn_backward_atomic: head dims past
// 64, entmax at another alpha) must give the two kernels' bits.
TEST_CASE("cuda attention: the atomic backward (one kernel) gives the split's gradients",
          "[cuda][emu]") {
  const BackwardCase cases[] = {
      {AttnMath::kSoftmax, 2, 64, 64, false, false},
      {AttnMath::kSoftplus, 2, 64, 64, false, false},
      {AttnMath::kRelu, 1, 64, 64, false, false},
      {AttnMath::kThreshold, 2, 64, 64, false, false},
      {AttnMath::kThreshold, 1, 64, 64, false, false},
      {AttnMath::kThreshold, 3, 64, 64, false, false},
      {AttnMath::kThreshold, 3, 128, 128, false, false},
      {AttnMath::kThreshold, 2, 64, 64, false, true},
      {AttnMath::kEntmax, 2, 64, 64, false, false},
      {AttnMath::kEntmax, 2, 64, 64, false, false, 1.25f},
      {AttnMath::kDiffSoftmax, 2, 32, 64, true, false},
      {AttnMath::kDiffRelu, 1, 64, 128, true, false},
      {AttnMath::kDiffRelu, 1, 64, 64, false, false},
      {AttnMath::kDiffThreshold, 2, 64, 64, false, false},
      {AttnMath::kDiffThreshold, 2, 64, 64, false, true},
  };
  for (int T : {17, 130}) {
    for (const BackwardCase& c : cases) {
      INFO("math " << attn_math_name(c.math) << " p " << c.power << " Dqk " << c.Dqk << " Dv "
                   << c.Dv << " drop " << c.drop << " T " << T);
      const AttnProblem split = backward_problem(c, T, 300 + T);
      AttnProblem one = split;
      one.atomic_dq = true;
      CudaOps gpu;
      const uint64_t l0 = emu::counters().launches;
      const Outputs a = run_attention(gpu, split);
      const uint64_t l1 = emu::counters().launches;
      const Outputs b = run_attention(gpu, one);
      // the zeroing kernel in place of the dq kernel, then the atomic dk/dv instance last; two
      // views at Dv 128 (whose kernel would spill) keep the two kernels: the same bits
      AttnArgs asked;
      asked.math = c.math;
      asked.Dqk = c.Dqk;
      asked.Dv = c.Dv;
      asked.atomic_dq = true;
      asked.entmax_alpha = c.alpha;
      const bool served = attn_backward_atomic(asked);
      CHECK(served == (c.Dqk <= 64 && c.Dv <= 64 && c.alpha == 1.5f));
      const emu::Counters after = emu::counters();
      CHECK(after.launches - l1 == l1 - l0);
      CHECK(std::any_of(after.kernels.begin(), after.kernels.end(), [](const std::string* k) {
        return k->find("fa_zero_dq_kernel") != std::string::npos;
      }));
      CHECK(after.last.kernel->find("fa_dkdv_kernel") != std::string::npos);
      CHECK(after.last.kernel->find(served ? ", true, 1>" : ", false, 1>") != std::string::npos);
      for (const auto& kv : a) {
        const std::string& key = kv.first;
        INFO(key);
        if (!served) {
          CHECK(same_bits(b.at(key), kv.second));
        } else if (key == "dq" || key == "dq2" || key == "drow_lambda" ||
                   (key == "drow_tau" &&
                    !(c.math == AttnMath::kSoftmax || c.math == AttnMath::kSoftplus ||
                      c.math == AttnMath::kDiffSoftmax || c.math == AttnMath::kEntmax))) {
          CHECK(rel_err(b.at(key), kv.second) < 2e-5);
        } else if (key == "drow_tau") {  // normalised (entmax: sum_j g_ij (e_ij - c_i) = 0):
                                         // -sum_j ds_ij cancels to rounding noise
          const auto& t = b.at(key);
          CHECK(std::all_of(t.begin(), t.end(), [](float v) { return std::isfinite(v); }));
        } else {
          CHECK(same_bits(b.at(key), kv.second));
        }
      }
    }
  }
}

// Two query tiles in flight in the dk/dv kernel (AttnArgs::bwd_stages 2, FlashAttention-2's double
// buffer) changes when Q, Q2 and dO are copied, not what is computed: every gradient the same bits
// as one stage, in the split backward and in the atomic one (the emulator adds the atomics in the
// same order). T inside one query tile, across several (an odd and an even count, so the last tile
// sits in either stage) and ending in a partial one; every kind's math; the sparse kinds' skip
// (whose early return must leave the next tile's copies in flight) and its negative control.
// Head dims past 64 (two views at Dv 128) and entmax's single kernel keep one stage: the same
// instance runs. A shuffled
// schedule (copies landing at issue or at their wait) would expose a refill of a buffer still read.
TEST_CASE("cuda attention: two query tiles in flight give the backward's bits", "[cuda][emu]") {
  const BackwardCase cases[] = {
      {AttnMath::kSoftmax, 2, 64, 64, false, false},
      {AttnMath::kSoftplus, 2, 64, 64, false, false},
      {AttnMath::kRelu, 1, 64, 64, false, false},
      {AttnMath::kThreshold, 2, 64, 64, false, false},
      {AttnMath::kThreshold, 2, 64, 64, false, false, 1.5f, true},
      {AttnMath::kThreshold, 1, 64, 64, false, true},
      {AttnMath::kEntmax, 2, 64, 64, false, false},
      {AttnMath::kEntmax, 2, 64, 64, false, false, 1.25f},
      {AttnMath::kDiffSoftmax, 2, 32, 64, true, false},
      {AttnMath::kDiffRelu, 1, 64, 128, true, false},
      {AttnMath::kDiffThreshold, 2, 64, 64, false, false},
      {AttnMath::kDiffThreshold, 3, 64, 64, true, true},
  };
  for (const uint64_t seed : {uint64_t(0), uint64_t(7)}) {
    ScheduleSeed schedule(seed);
    for (int T : {17, 130, 200}) {
      for (const BackwardCase& c : cases) {
        for (const bool atomic : {false, true}) {
          if (seed && (atomic || T == 200)) continue;  // the shuffled schedule: split, fewer T
          INFO("math " << attn_math_name(c.math) << " p " << c.power << " Dqk " << c.Dqk << " Dv "
                       << c.Dv << " drop " << c.drop << " no_skip " << c.no_skip << " T " << T
                       << " atomic " << atomic << " seed " << seed);
          AttnProblem one = backward_problem(c, T, 500 + T);
          one.atomic_dq = atomic;
          one.bwd_stages = 1;
          AttnProblem two = one;
          two.bwd_stages = 2;
          CudaOps gpu;
          const Outputs a = run_attention(gpu, one);
          const Outputs b = run_attention(gpu, two);
          AttnArgs asked;
          asked.math = c.math;
          asked.Dqk = c.Dqk;
          asked.Dv = c.Dv;
          asked.entmax_alpha = c.alpha;
          asked.atomic_dq = atomic;
          asked.bwd_stages = 2;
          const bool served = attn_backward_stages(asked) == 2;
          const bool entmax_atomic = c.math == AttnMath::kEntmax && atomic && c.alpha == 1.5f;
          CHECK(served == (c.Dv <= 64 && !entmax_atomic));
          const emu::Counters after = emu::counters();
          REQUIRE(after.last.kernel);
          CHECK_THAT(*after.last.kernel, Catch::Contains("fa_dkdv_kernel") &&
                                             Catch::EndsWith(served ? ", 2>" : ", 1>"));
          REQUIRE(a.size() == b.size());
          for (const auto& kv : a) {
            INFO(kv.first);
            CHECK(same_bits(b.at(kv.first), kv.second));
          }
        }
      }
    }
  }
}
