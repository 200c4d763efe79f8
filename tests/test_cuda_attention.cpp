// Every AttnMath of the CUDA backend (tensor-core kernels, emulated) against the CPU backend,
// forward and backward: out, out2, stats, survivors, dq, dk, dv, dq2, dk2, drow_tau,
// drow_lambda, at T in {1, 17, 64, 130, 257} (not multiples of the 64 tile but for 64) and the
// configs' head dims (64; diff kinds Dqk 32 / Dv 64 and 64 / 128 in the Diff layout; 16).
//
// Tolerances (rel_err: max abs error over the tensor's max abs value):
//  * vs the CPU on bf16-rounded q, k, v, dout ("tight"): the kernels round exactly those when
//    loading tiles, so what remains is the rounding of the weights W (and of ds in the backward)
//    to bf16 for the second mma, relative error <= 2^-9 = 2e-3 per term, partly averaging out;
//    plus fp32 summation order. Bound: 1e-2 (observed up to ~3e-3).
//  * vs the CPU on the fp32 inputs ("loose"): scores carry the input rounding, |ds| <= 2^-8
//    sum_d |q_d k_d| scale, ~2e-2 for |q|,|k| <= 2 at D = 64; softmax weights move by that
//    relative amount. Bound: 5e-2 (observed up to ~1.5e-2).
//  * survivors (counts): identical on rounded inputs, except a score within fp32 rounding of tau.
// Entmax takes the same tensor-core path (its threshold pre-pass bisects on the same bf16 score
// tiles, then the closed form on the support or the bisection result) and the same bounds.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "test_cuda_attention_util.h"

using namespace tda;
using namespace tda::cuda_test;

namespace {

// rel_err with the scale floored at 0.1: quantities that cancel to ~0 in exact arithmetic
// (normalised kinds' dq, dk at T = 1, their drow_tau) are judged against the O(1) input scale.
double err(const std::vector<float>& got, const std::vector<float>& ref) {
  double num = 0.0, den = 0.1;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num = std::max(num, std::fabs(double(got[i]) - double(ref[i])));
    den = std::max(den, std::fabs(double(ref[i])));
  }
  return num / den;
}

bool is_count(const std::string& key) {
  return key == "survivors";
}

// Compares every output of the CUDA run with the CPU on rounded and on raw inputs.
void compare(const AttnProblem& p, double tight = 1e-2, double loose = 5e-2) {
  CpuOps cpu;
  CudaOps gpu;
  const Outputs got = run_attention(gpu, p);
  const Outputs ref_bf = run_attention(cpu, rounded(p));
  const Outputs ref = run_attention(cpu, p);
  for (const auto& kv : ref) {
    const std::string& key = kv.first;
    if (p.math == AttnMath::kEntmax && (key == "drow_tau" || key == "drow_lambda")) continue;
    // Normalised kinds: drow_tau_i = -sum_j ds_ij = 0 in exact arithmetic (sum_j a (e - D) = 0),
    // both backends return rounding noise; no variant of those kinds uses it.
    if (key == "drow_tau" && (p.math == AttnMath::kSoftmax || p.math == AttnMath::kSoftplus ||
                              p.math == AttnMath::kDiffSoftmax))
      continue;
    INFO("math " << int(p.math) << " T " << p.T << " Dqk " << p.Dqk << " Dv " << p.Dv << " "
                 << key);
    const auto& g = got.at(key);
    if (is_count(key)) {
      // A survivor count can differ only where a score sits within rounding of the threshold.
      double diff = 0, tot = 1e-30;
      for (size_t i = 0; i < g.size(); ++i) {
        diff += std::fabs(g[i] - ref_bf.at(key)[i]);
        tot += ref_bf.at(key)[i];
      }
      CHECK(diff / tot < 1e-3);
      continue;
    }
    CHECK(err(g, ref_bf.at(key)) < tight);
    // p = 1 rectifiers: da/ds jumps from 0 to 1 at the threshold, so scores that the input
    // rounding moves across it change the gradients by O(1) terms; only the forward outputs
    // (continuous in s) are compared with the unrounded inputs.
    // Sparsemax (entmax alpha 2) alike: its backward weight p^(2 - alpha) is 1 on the support.
    const bool step = p.math == AttnMath::kRelu || p.math == AttnMath::kDiffRelu || p.power == 1 ||
                      (p.math == AttnMath::kEntmax && p.alpha == 2.f);
    if (!step || key == "out" || key == "out2") CHECK(err(g, kv.second) < loose);
  }
}

AttnProblem problem(AttnMath m, int T, int Dqk, int Dv, uint32_t seed) {
  AttnProblem p;
  p.math = m;
  p.T = T;
  p.Dqk = Dqk;
  p.Dv = Dv;
  if (m == AttnMath::kThreshold || m == AttnMath::kDiffThreshold) p.power = 2;
  if (attn_two_views(m)) {
    p.lambda = 0.4f;
    p.diff_layout = (m != AttnMath::kDiffThreshold);  // the Diff variants' layout
  }
  p.fill(seed);
  return p;
}

constexpr int kTs[] = {1, 17, 64, 130};

}  // namespace

TEST_CASE("cuda attention: softmax family matches the CPU (tensor cores)", "[cuda][emu]") {
  for (int T : kTs) {
    compare(problem(AttnMath::kSoftmax, T, 64, 64, 100 + T));
    compare(problem(AttnMath::kSoftplus, T, 64, 64, 200 + T));
    compare(problem(AttnMath::kDiffSoftmax, T, 32, 64, 300 + T));
  }
  compare(problem(AttnMath::kSoftmax, 17, 16, 16, 11));        // small head
  compare(problem(AttnMath::kDiffSoftmax, 130, 64, 128, 12));  // the 128 bucket (d12 diff)
  // head dims not a multiple of 4: the tile loads' scalar path (no 16-byte loads)
  compare(problem(AttnMath::kSoftmax, 70, 6, 10, 14));
  compare(problem(AttnMath::kDiffSoftmax, 33, 7, 13, 15));
}

TEST_CASE("cuda attention: rectifier and threshold kinds match the CPU", "[cuda][emu]") {
  for (int T : kTs) {
    compare(problem(AttnMath::kRelu, T, 64, 64, 400 + T));
    compare(problem(AttnMath::kThreshold, T, 64, 64, 500 + T));
    compare(problem(AttnMath::kDiffRelu, T, 32, 64, 600 + T));
    compare(problem(AttnMath::kDiffThreshold, T, 64, 64, 700 + T));
  }
  AttnProblem p3 = problem(AttnMath::kThreshold, 33, 40, 40, 13);
  p3.power = 3;
  compare(p3);
}

TEST_CASE("cuda attention: entmax (tensor-core threshold search) matches the CPU", "[cuda][emu]") {
  for (int T : kTs) {
    AttnProblem p = problem(AttnMath::kEntmax, T, 64, 64, 800 + T);
    compare(p);  // exact solver on the CPU, bisection + closed form on the support on CUDA
    p.bisect = true;
    compare(p);  // the CPU's bisection solver on both
  }
  compare(problem(AttnMath::kEntmax, 70, 128, 128, 13));  // the 128 bucket
}

// The exact solver's Halley search (kernels/attention_entmax.cu) ends on the sort solver's
// threshold, not near it: on bf16-rounded inputs (the scores both sides see, up to fp32
// summation order) tau agrees with the CPU's sort to 2e-5, where the forward's 1e-2 bound above
// would let a wrong support pass. Ties (keys repeated, so many u are equal) and a row of one key
// included. The passes over a block's key tiles, counted by the kernel, are what the change was
// for: bisection took entmax_iters + 3 = 33 per block.
TEST_CASE("cuda attention: entmax's Halley threshold is the sort solver's, in few passes",
          "[cuda][emu]") {
  CpuOps cpu;
  CudaOps gpu;
  for (int T : {1, 64, 130, 300})
    for (bool ties : {false, true}) {
      AttnProblem p = rounded(problem(AttnMath::kEntmax, T, 64, 64, 850 + T));
      if (ties)  // every key one of 5 rows: u takes 5 values per row
        for (int bh = 0; bh < p.B * p.H; ++bh)
          for (int j = 0; j < T; ++j)
            for (int d = 0; d < 64; ++d)
              p.k[(size_t(bh) * T + j) * 64 + d] = p.k[(size_t(bh) * T + j % 5) * 64 + d];
      long long tiles = 0;
      const Outputs got = run_attention(gpu, p, nullptr, nullptr, &tiles);
      const Outputs ref = run_attention(cpu, p);
      const auto &gs = got.at("stats"), &rs = ref.at("stats");
      double worst = 0;
      for (size_t r = 0; r < p.rows(); ++r) {
        worst = std::max(worst, double(std::fabs(gs[2 * r] - rs[2 * r])));
        CHECK(gs[2 * r + 1] == 1.f);  // exact: norm 1
      }
      const long long nb = (T + 63) / 64, per_pass = nb * (nb + 1) / 2 * p.B * p.H;  // causal
      INFO("T " << T << " ties " << ties << " tau error " << worst << ", passes "
                << double(tiles) / double(per_pass));
      CHECK(worst < 2e-5);
      CHECK(tiles >= per_pass + 1);  // the max pass, then at least one Halley pass's tile
      CHECK(tiles <= 6 * per_pass);  // Newton's steps took up to 7.1 here
    }
}

// The threshold search is tile-aware (AdaSplash's block skipping, kernels/attention_entmax.cu):
// after the max pass, a pass skips a warp's key tile whose largest u is at or below every open
// row's point. On block-local inputs (each query and key carries +8 on the coordinate of its
// 64-block, so a row's own block scores ~8 and the others ~0: the local heads of a trained model)
// every tile below the diagonal is skipped after the max pass, and nothing changes: stats,
// outputs and gradients are the bits of the search that computes every tile (no_skip), and the
// forward matches the CPU's.
TEST_CASE("cuda attention: entmax's threshold passes skip dead key tiles, same bits",
          "[cuda][emu]") {
  CudaOps gpu;
  const int T = 300, D = 64;
  const long long nb = (T + 63) / 64, per_pass = nb * (nb + 1) / 2, diag = nb;
  for (bool bisect : {false, true}) {
    AttnProblem p = problem(AttnMath::kEntmax, T, D, D, 870);
    p.bisect = bisect;
    p.fill(870, /*amp=*/0.5f);
    for (int bh = 0; bh < p.B * p.H; ++bh)
      for (int i = 0; i < T; ++i) {
        p.q[(size_t(bh) * T + i) * D + i / 64] += 8.f;
        p.k[(size_t(bh) * T + i) * D + i / 64] += 8.f;
      }
    AttnProblem full = p;
    full.no_skip = true;
    long long tiles = 0, tiles_full = 0;
    const Outputs got = run_attention(gpu, p, nullptr, nullptr, &tiles);
    const Outputs ref = run_attention(gpu, full, nullptr, nullptr, &tiles_full);
    INFO("bisect " << bisect << ": threshold tiles " << tiles << " of " << tiles_full);
    for (const auto& kv : ref) {
      INFO(kv.first);
      CHECK(got.at(kv.first) == kv.second);
    }
    const long long bh = p.B * p.H;
    CHECK(tiles < tiles_full);
    if (bisect) {  // every block makes the same passes: after the max pass, diagonal tiles only
      const long long passes = tiles_full / (per_pass * bh);
      CHECK(tiles_full == passes * per_pass * bh);
      CHECK(tiles == (per_pass + (passes - 1) * diag) * bh);
    }
    // The forward against the CPU on the rounded inputs. (Not the gradients: dq = scale sum_j
    // ds_ij (k_j - mean k) cancels the shared +8 of a block's keys, and ds's rounding to bf16
    // leaves 2^-9 of that: ~3% of dq on these inputs, with or without the skip.)
    AttnProblem fwd = rounded(p);
    fwd.backward = false;
    CpuOps cpu;
    const Outputs cref = run_attention(cpu, fwd), cgot = run_attention(gpu, fwd);
    CHECK(err(cgot.at("out"), cref.at("out")) < 1e-2);
    CHECK(err(cgot.at("stats"), cref.at("stats")) < (bisect ? 1e-4 : 2e-5));
  }
}

TEST_CASE("cuda attention: alpha-entmax (alpha 1.25, 2) by bisection matches the CPU",
          "[cuda][emu]") {
  for (float alpha : {1.25f, 2.f})
    for (int T : {1, 45, 130}) {
      AttnProblem p = problem(AttnMath::kEntmax, T, 64, 64, 810 + T);
      p.alpha = alpha;
      p.bisect = true;
      INFO("alpha " << alpha);
      compare(p);
    }
}

TEST_CASE("cuda attention: T = 257 for one normalised, one sparse, one two-view kind",
          "[cuda][emu][slow]") {
  compare(problem(AttnMath::kSoftmax, 257, 64, 64, 901));
  compare(problem(AttnMath::kDiffThreshold, 257, 64, 64, 902));
  compare(problem(AttnMath::kEntmax, 257, 64, 64, 903));
}
