// What the CPU attention kernels share: the tile size, per-(b, h) slices, argument checks and
// the dispatch from AttnMath to a policy. Two implementations of the streaming skeleton use it:
// attention_stream.cpp (vectorised: tile products on simd::Vec registers, the backend's kernel)
// and attention_scalar.cpp (one (i, j) at a time: the reference the tests compare it with).
#pragma once
#include <algorithm>
#include <cstddef>
#include <vector>

#include "attention/policies.h"
#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace tda {
namespace cpu_attn {

// 64 x 64 tiles on the CPU as on the GPU, so both count the same skipped tiles.
constexpr int kTile = 64;

struct Slices {
  const float *q, *k, *v, *q2, *k2;
};

inline Slices slices(const AttnArgs& a, int bh) {
  const size_t sqk = a.qk_bh_stride ? a.qk_bh_stride : size_t(a.T) * a.Dqk;
  const size_t sv = size_t(a.T) * a.Dv;
  Slices s{a.q + bh * sqk, a.k + bh * sqk, a.v + bh * sv, nullptr, nullptr};
  if (a.q2) {
    s.q2 = a.q2 + bh * sqk;
    s.k2 = a.k2 + bh * sqk;
  }
  return s;
}

inline void check_args(const AttnArgs& a) {
  TDA_CHECK(a.q && a.k && a.v && a.out, "attention: q, k, v and out are required");
  TDA_CHECK(attn_q_scale_ok(a), kAttnQScaleError);
  if (attn_two_views(a.math)) TDA_CHECK(a.q2 && a.k2, "attention: two-view math needs q2, k2");
  if (a.math == AttnMath::kDiffSoftmax) TDA_CHECK(a.out2, "attention: kDiffSoftmax needs out2");
  if (attn_n_stats(a.math) > 0) TDA_CHECK(a.stats, "attention: this math needs stats");
  TDA_CHECK(a.power >= 1, "attention: power must be >= 1");
}

inline void check_backward_args(const AttnArgs& a) {
  TDA_CHECK(a.dout && a.dq && a.dk && a.dv, "attention: backward needs dout, dq, dk, dv");
  TDA_CHECK(a.q_start == 0, "attention: backward needs q_start == 0 (full rows)");
  if (attn_two_views(a.math)) TDA_CHECK(a.dq2 && a.dk2, "attention: two-view math needs dq2, dk2");
}

// In the order both kernels sum it (no reassociation: the two stay bit-identical).
inline float dot(const float* a, const float* b, int n) {
  float s = 0.f;
  for (int d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

// One (b, h) of a backward, begun as both kernels begin it: its gradient slices (zeroed: the
// key loop accumulates into them), dtau and dlam zeroed, and for the normalised maths the row
// terms  D1_i = g_i . o1_i  with o1 = out + lambda o2 for two views, where also
// D2_i = -lambda g_i . o2_i and dlambda_i = -g_i . o2_i. drop_term (the tests' negative
// control) zeroes D1 and D2.
struct BwdSlices {
  const float* go;
  float *dq, *dk, *dq2, *dk2, *dv;
};
template <class P, bool kTwo>
BwdSlices begin_backward_bh(const AttnArgs& a, int bh, float lam, bool drop_term,
                            std::vector<float>& D1, std::vector<float>& D2,
                            std::vector<float>& dtau, std::vector<float>& dlam) {
  const int T = a.T, Dk = a.Dqk, Dv = a.Dv;
  const size_t sqk = a.qk_bh_stride ? a.qk_bh_stride : size_t(T) * Dk;
  BwdSlices g{a.dout + size_t(bh) * T * Dv,
              a.dq + bh * sqk,
              a.dk + bh * sqk,
              kTwo ? a.dq2 + bh * sqk : nullptr,
              kTwo ? a.dk2 + bh * sqk : nullptr,
              a.dv + size_t(bh) * T * Dv};
  std::fill(g.dq, g.dq + size_t(T) * Dk, 0.f);
  std::fill(g.dk, g.dk + size_t(T) * Dk, 0.f);
  if (kTwo) {
    std::fill(g.dq2, g.dq2 + size_t(T) * Dk, 0.f);
    std::fill(g.dk2, g.dk2 + size_t(T) * Dk, 0.f);
  }
  std::fill(g.dv, g.dv + size_t(T) * Dv, 0.f);
  std::fill(dtau.begin(), dtau.end(), 0.f);
  std::fill(dlam.begin(), dlam.end(), 0.f);
  if (P::kNormalized) {
    for (int i = 0; i < T; ++i) {
      const size_t row = size_t(bh) * T + i;
      const float* gi = g.go + size_t(i) * Dv;
      const float* o = a.out + row * Dv;
      if (kTwo) {
        const float* o2 = a.out2 + row * Dv;
        const float go2 = dot(gi, o2, Dv);
        D1[i] = dot(gi, o, Dv) + lam * go2;
        D2[i] = -lam * go2;
        dlam[i] = -go2;
      } else {
        D1[i] = dot(gi, o, Dv);
      }
      if (drop_term) D1[i] = D2[i] = 0.f;
    }
  }
  return g;
}

// ... and ended: the per-row scalar partials written (not accumulated; the variant reduces them).
inline void end_backward_bh(const AttnArgs& a, int bh, const std::vector<float>& dtau,
                            const std::vector<float>& dlam) {
  for (int i = 0; i < a.T; ++i) {
    const size_t row = size_t(bh) * a.T + i;
    if (a.drow_tau) a.drow_tau[row] = dtau[i];
    if (a.drow_lambda) a.drow_lambda[row] = dlam[i];
  }
}

// ReLA is the threshold rectifier with tau = 0 and p = 1. A query row scale is applied to a
// copy of q held in `q_store` (q'_hi = f_hi q_hi, one fp32 product), which the kernels
// then read as q: their dq is the gradient of q', as AttnArgs says.
inline AttnArgs resolve(const AttnArgs& in, std::vector<float>& q_store) {
  AttnArgs a = in;
  if (in.math == AttnMath::kRelu || in.math == AttnMath::kDiffRelu) {
    a.tau = nullptr;
    a.power = 1;
  }
  if (in.q_scale) {
    const int BH = a.B * a.H, T = a.T, D = a.Dqk;
    q_store.resize(size_t(BH) * T * D);
#pragma omp parallel for collapse(2) schedule(static)
    for (int bh = 0; bh < BH; ++bh)
      for (int t = 0; t < T; ++t) {
        const float f = in.q_scale[size_t(bh % a.H) * in.q_scale_h_stride + t];
        const size_t off = (size_t(bh) * T + t) * D;
        for (int d = 0; d < D; ++d) q_store[off + d] = f * in.q[off + d];
      }
    a.q = q_store.data();
    a.q_scale = nullptr;
  }
  return a;
}

// Calls K<Policy, two_views>::run(a) for a's math; entmax (whole rows) has its own kernel.
// Each file names its K uniquely: GCC gives dispatch<K> vague linkage even when K sits in an
// anonymous namespace, so two files' dispatch<Forward> would be merged by the linker.
// Extra: what the kernels take after the arguments (the backward: the negative-control switch).
template <template <class, bool> class K, class... Extra>
void dispatch(const AttnArgs& a, void (*entmax)(const AttnArgs&, Extra...), Extra... extra) {
  using namespace attn;
  switch (a.math) {
    case AttnMath::kSoftmax:
      return K<SoftmaxPolicy, false>::run(a, extra...);
    case AttnMath::kSoftplus:
      return K<SoftplusPolicy, false>::run(a, extra...);
    case AttnMath::kRelu:
    case AttnMath::kThreshold:
      return K<ThresholdPolicy, false>::run(a, extra...);
    case AttnMath::kDiffSoftmax:
      return K<SoftmaxPolicy, true>::run(a, extra...);
    case AttnMath::kDiffRelu:
    case AttnMath::kDiffThreshold:
      return K<ThresholdPolicy, true>::run(a, extra...);
    case AttnMath::kEntmax:
      return entmax(a, extra...);
  }
  throw Error("cpu backend: unsupported attention math");
}

}  // namespace cpu_attn
}  // namespace tda
