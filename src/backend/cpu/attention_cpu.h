// What the CPU attention kernels share: the tile size, per-(b, h) slices, argument checks and
// the dispatch from AttnMath to a policy. Two implementations of the streaming skeleton use it:
// attention_stream.cpp (vectorised: tile products on simd::Vec registers, the backend's kernel)
// and attention_scalar.cpp (one (i, j) at a time: the reference the tests compare it with).
#pragma once
#include <cstddef>

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

// ReLA is the threshold rectifier with tau = 0 and p = 1.
inline AttnArgs resolve(const AttnArgs& in) {
  AttnArgs a = in;
  if (in.math == AttnMath::kRelu || in.math == AttnMath::kDiffRelu) {
    a.tau = nullptr;
    a.power = 1;
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
