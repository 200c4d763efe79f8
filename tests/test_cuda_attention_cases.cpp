// Special cases of the CUDA attention kernels (emulated): rows with no survivors, causality, the
// tile-skip path with its exact count, negative controls, determinism under shuffled schedules.
// Tolerances as in test_cuda_attention.cpp (bf16 products: 1e-2 of the tensor's scale against
// the CPU on bf16-rounded inputs).
#include <catch2/catch.hpp>

#include "core/error.h"
#include "test_cuda_attention_util.h"

using namespace tda;
using namespace tda::cuda_test;

namespace {
AttnProblem make(AttnMath m, int T, int D, uint32_t seed) {
  AttnProblem p;
  p.math = m;
  p.T = T;
  p.Dqk = p.Dv = D;
  p.power = 2;
  p.lambda = attn_two_views(m) ? 0.4f : 0.f;
  p.fill(seed);
  return p;
}

std::vector<float> all_of(const Outputs& o) {
  std::vector<float> v;
  for (const auto& kv : o) v.insert(v.end(), kv.second.begin(), kv.second.end());
  return v;
}
}  // namespace

TEST_CASE("cuda attention: rows with no survivors give zero output and gradient", "[cuda][emu]") {
  for (AttnMath m : {AttnMath::kThreshold, AttnMath::kDiffThreshold}) {
    AttnProblem p = make(m, 45, 32, 31);
    for (int i = 0; i < p.T; i += 3) p.tau[size_t(i)] = 1e3f;  // no score reaches it
    CudaOps gpu;
    CpuOps cpu;
    const Outputs got = run_attention(gpu, p), ref = run_attention(cpu, rounded(p));
    for (int bh = 0; bh < p.H; ++bh)
      for (int i = 0; i < p.T; i += 3) {
        const size_t r = size_t(bh) * p.T + i;
        for (int d = 0; d < p.Dv; ++d) CHECK(got.at("out")[r * p.Dv + d] == 0.f);
        CHECK(got.at("survivors")[r * (p.two() ? 3 : 1)] == 0.f);
        CHECK(got.at("drow_tau")[r] == 0.f);
        for (int d = 0; d < p.Dqk; ++d) CHECK(got.at("dq")[r * p.Dqk + d] == 0.f);
      }
    for (const char* key : {"out", "dq", "dk", "dv", "drow_tau", "survivors"})
      CHECK(rel_err(got.at(key), ref.at(key)) < 1e-2);
  }
}

TEST_CASE("cuda attention: changing a future key or value leaves earlier rows unchanged",
          "[cuda][emu]") {
  for (AttnMath m : {AttnMath::kSoftmax, AttnMath::kDiffThreshold, AttnMath::kEntmax}) {
    INFO("math " << int(m));
    const int T = 70, D = 16, t0 = 40;
    AttnProblem p = make(m, T, D, 41), p2 = p;
    for (int bh = 0; bh < p.H; ++bh)
      for (int d = 0; d < D; ++d) {
        const size_t x = (size_t(bh) * T + t0) * D + d;
        p2.k[x] += 3.f;
        p2.v[x] -= 2.f;
        if (p.two()) p2.k2[x] += 3.f;
      }
    CudaOps gpu;
    p.g.assign(p.g.size(), 0.f);  // forward only matters here; keep dout identical
    p2.g = p.g;
    const Outputs a = run_attention(gpu, p), b = run_attention(gpu, p2);
    bool before_same = true, after_differs = false;
    for (int bh = 0; bh < p.H; ++bh)
      for (int i = 0; i < T; ++i)
        for (int d = 0; d < D; ++d) {
          const size_t x = (size_t(bh) * T + i) * D + d;
          if (i < t0) before_same &= a.at("out")[x] == b.at("out")[x];
          if (i >= t0) after_differs |= a.at("out")[x] != b.at("out")[x];
        }
    CHECK(before_same);
    CHECK(after_differs);  // the change is visible where it should be
  }
}

// q_i = c u + noise for every row; k_j = c u + noise except keys 64..127 (key tile 1), where
// k_j = -c u + noise: scores of tile 1 are ~ -c^2 |u|^2 scale << tau, so for T = 200 the pairs
// (query block b, key tile 1) for b = 1, 2, 3 are dead: 3 skipped of 1 + 2 + 3 + 4 = 10 per (b, h).
TEST_CASE("cuda attention: dead tiles are skipped, counted exactly, and change nothing",
          "[cuda][emu]") {
  for (AttnMath m : {AttnMath::kThreshold, AttnMath::kDiffThreshold, AttnMath::kRelu}) {
    INFO("math " << int(m));
    const int T = 200, D = 16;
    AttnProblem p = make(m, T, D, 51);
    for (auto* x : {&p.q, &p.k, &p.q2, &p.k2})
      for (size_t e = 0; e < x->size(); ++e) {
        const size_t j = (e / D) % size_t(T), d = e % D;
        const float sign = (x == &p.k || x == &p.k2) && j >= 64 && j < 128 ? -1.f : 1.f;
        (*x)[e] = sign * (d < 4 ? 2.f : 0.f) + 0.05f * (*x)[e];
      }
    CudaOps gpu;
    CpuOps cpu;
    long long skipped = -1, total = -1, cskipped = -1, ctotal = -1, nskipped = -1, ntotal = -1;
    const Outputs got = run_attention(gpu, p, &skipped, &total);
    const Outputs ref = run_attention(cpu, rounded(p), &cskipped, &ctotal);
    CHECK(total == 2 * 10);
    CHECK(skipped == 2 * 3);
    CHECK(ctotal == total);  // the CPU kernel counts the same tiles
    CHECK(cskipped == skipped);
    AttnProblem all = p;
    all.no_skip = true;
    const Outputs full = run_attention(gpu, all, &nskipped, &ntotal);
    CHECK(nskipped == 0);
    CHECK(ntotal == total);
    CHECK(same_bits(all_of(got), all_of(full)));  // skipping only drops exact zeros
    for (const char* key : {"out", "dq", "dk", "dv", "drow_tau"})
      CHECK(rel_err(got.at(key), ref.at(key)) < 1e-2);
  }
}

// Negative controls: dropping a backward term (D_i for softmax, the factor p of p r^(p-1) for
// the threshold kind) must move dq far beyond the tolerance, and both backends agree on the hook.
TEST_CASE("cuda attention: a backward without D_i or without p is caught", "[cuda][emu]") {
  for (AttnMath m : {AttnMath::kSoftmax, AttnMath::kThreshold, AttnMath::kEntmax}) {
    INFO("math " << int(m));
    AttnProblem p = make(m, 37, 32, 61), bad = p;
    bad.drop = true;
    CudaOps gpu;
    CpuOps cpu;
    const auto good = run_attention(gpu, p).at("dq"), wrong = run_attention(gpu, bad).at("dq");
    CHECK(rel_err(wrong, good) > 5e-2);
    CHECK(rel_err(wrong, run_attention(cpu, rounded(bad)).at("dq")) < 1e-2);
  }
}

// ssmax's and lssa's query row scale, applied by the kernels as they read q (on the GPU inside
// the bf16 operand cast): the same bits as the kernels run on q' = f q scaled beforehand (one
// fp32 product per element), forward and backward (dq is d/dq' in both), per head
// (ssmax) and shared by the heads (lssa), on both backends.
TEST_CASE("cuda attention: a query row scale equals the kernels on q scaled beforehand",
          "[cuda][emu]") {
  for (AttnMath m : {AttnMath::kSoftmax, AttnMath::kSoftplus, AttnMath::kEntmax})
    for (int h_stride : {0, 45}) {
      INFO("math " << int(m) << " head stride " << h_stride);
      AttnProblem p = make(m, 45, 16, 83);
      p.q_scale = rnd(size_t(h_stride ? p.H : 1) * p.T, 84, 0.f, 2.f);
      p.q_scale[0] = 0.f;  // lssa's c_0 = log 1 = 0
      p.q_scale_h_stride = h_stride;
      AttnProblem pre = p;
      pre.q_scale.clear();
      for (int bh = 0; bh < p.B * p.H; ++bh)
        for (int t = 0; t < p.T; ++t)
          for (int d = 0; d < p.Dqk; ++d) {
            const size_t x = (size_t(bh) * p.T + t) * p.Dqk + d;
            pre.q[x] = p.q_scale[size_t(bh % p.H) * h_stride + t] * p.q[x];
          }
      AttnProblem plain = p;
      plain.q_scale.clear();
      CudaOps gpu;
      CpuOps cpu;
      for (Ops* ops : {static_cast<Ops*>(&gpu), static_cast<Ops*>(&cpu)}) {
        const Outputs got = run_attention(*ops, p), want = run_attention(*ops, pre);
        CHECK(same_bits(all_of(got), all_of(want)));
        CHECK(rel_err(got.at("out"), run_attention(*ops, plain).at("out")) > 1e-2);  // applied
      }
    }
  AttnProblem two = make(AttnMath::kDiffThreshold, 45, 16, 85);
  two.q_scale.assign(size_t(two.T), 1.f);
  CudaOps gpu;
  CpuOps cpu;
  for (Ops* ops : {static_cast<Ops*>(&gpu), static_cast<Ops*>(&cpu)})
    CHECK_THROWS_WITH(run_attention(*ops, two),
                      Catch::Contains("a query row scale needs one view"));
}

TEST_CASE("cuda attention: bit-identical under shuffled schedules", "[cuda][emu]") {
  for (AttnMath m : {AttnMath::kDiffSoftmax, AttnMath::kDiffThreshold, AttnMath::kEntmax}) {
    AttnProblem p = make(m, 45, 16, 71);
    std::vector<float> bits;
    for (uint64_t seed : {0, 5, 23}) {
      ScheduleSeed guard(seed);
      CudaOps gpu;
      const auto v = all_of(run_attention(gpu, p));
      if (bits.empty())
        bits = v;
      else
        CHECK(same_bits(v, bits));
    }
  }
}

// KV-cache decoding: rows >= q_start equal the full forward bit for bit, rows below are 0.
TEST_CASE("cuda attention: q_start computes only the rows at and after it", "[cuda][emu]") {
  for (AttnMath m :
       {AttnMath::kSoftmax, AttnMath::kDiffSoftmax, AttnMath::kThreshold, AttnMath::kEntmax}) {
    INFO("math " << int(m));
    for (int qs : {0, 70, 129}) {
      AttnProblem p = make(m, 130, 16, 91), part = p;
      part.q_start = qs;
      p.q_start = 0;
      CudaOps gpu;
      CpuOps cpu;
      long long t_cpu = -1, t_gpu = -1, s_cpu = -1, s_gpu = -1;
      const Outputs full = run_attention(gpu, p), got = run_attention(gpu, part, &s_gpu, &t_gpu);
      run_attention(cpu, rounded(part), &s_cpu, &t_cpu);
      CHECK(t_gpu == t_cpu);
      CHECK(s_gpu == s_cpu);
      for (const char* key : {"out", "out2"}) {
        if (!got.count(key)) continue;
        const auto &g = got.at(key), &f = full.at(key);
        bool same = true, zero = true;
        for (int bh = 0; bh < p.H; ++bh)
          for (int i = 0; i < p.T; ++i)
            for (int d = 0; d < p.Dv; ++d) {
              const size_t x = (size_t(bh) * p.T + i) * p.Dv + d;
              if (i >= qs) same &= g[x] == f[x];
              if (i < qs) zero &= g[x] == 0.f;
            }
        CHECK(same);
        CHECK(zero);
      }
    }
  }
}

// KV-cache decoding runs attention over the T rows cached so far: a row must not depend on how
// many rows follow it (T: zero-filled tiles past it, padding, the grid), bit for bit.
TEST_CASE("cuda attention: the rows of a prefix equal the full sequence's, bit for bit",
          "[cuda][emu]") {
  for (AttnMath m : {AttnMath::kSoftmax, AttnMath::kThreshold, AttnMath::kEntmax}) {
    INFO("math " << int(m));
    AttnProblem p = make(m, 130, 16, 93), s = p;
    s.T = 70;
    auto prefix = [&](const std::vector<float>& x, int D) {
      std::vector<float> y;
      for (size_t bh = 0; bh < size_t(p.B) * p.H; ++bh)
        y.insert(y.end(), x.begin() + bh * p.T * D, x.begin() + (bh * p.T + s.T) * D);
      return y;
    };
    s.q = prefix(p.q, p.Dqk);
    s.k = prefix(p.k, p.Dqk);
    s.v = prefix(p.v, p.Dv);
    s.g = prefix(p.g, p.Dv);
    if (!p.tau.empty()) s.tau.assign(p.tau.begin(), p.tau.begin() + s.T);
    CudaOps gpu;
    const Outputs full = run_attention(gpu, p), part = run_attention(gpu, s);
    const auto &f = full.at("out"), &g = part.at("out");
    size_t differ = 0;
    for (size_t bh = 0; bh < size_t(p.B) * p.H; ++bh)
      for (size_t x = 0; x < size_t(s.T) * p.Dv; ++x)
        differ += g[bh * s.T * p.Dv + x] != f[bh * p.T * p.Dv + x];
    CHECK(differ == 0);
  }
}

TEST_CASE("cuda attention: head dims above 128 are refused, and above 64 for two views",
          "[cuda][emu]") {
  AttnProblem p = make(AttnMath::kSoftmax, 5, 136, 81);
  CudaOps gpu;
  CHECK_THROWS_AS(run_attention(gpu, p), Error);
  // One view at 96 runs in the (128, 128) bucket; two views have no kernel there (three
  // accumulators of 128 columns would not fit in registers).
  CHECK_NOTHROW(run_attention(gpu, make(AttnMath::kSoftmax, 5, 96, 82)));
  CHECK_THROWS_WITH(run_attention(gpu, make(AttnMath::kDiffThreshold, 5, 96, 83)),
                    Catch::Contains("two-view kinds need Dqk <= 64"));
}
