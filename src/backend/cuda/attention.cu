// Attention dispatch of the CUDA backend: argument checks (the CPU backend's), ReLA as the
// threshold rectifier with tau = 0 and p = 1 (as on the CPU), then the tiled tensor-core kernels
// (kernels/attention_fwd.cu, attention_bwd.cu) for every math, entmax included (its row
// pre-passes: kernels/attention_entmax.cu).
#include <string>

#include "backend/cuda/attention_tc.cuh"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"

namespace tda::cuda {

namespace {
// backward_saved: a backward that reads its forward's bf16 copies (AttnArgs::saved), not q, k, v.
void check_args(const AttnArgs& a, bool backward_saved) {
  TDA_CHECK(a.out, "attention: out is required");
  if (!backward_saved) TDA_CHECK(a.q && a.k && a.v, "attention: q, k and v are required");
  TDA_CHECK(attn_q_scale_ok(a), kAttnQScaleError);
  if (attn_two_views(a.math) && !backward_saved)
    TDA_CHECK(a.q2 && a.k2, "attention: two-view math needs q2, k2");
  if (a.math == AttnMath::kDiffSoftmax) TDA_CHECK(a.out2, "attention: kDiffSoftmax needs out2");
  if (attn_n_stats(a.math) > 0) TDA_CHECK(a.stats, "attention: this math needs stats");
  TDA_CHECK(a.power >= 1, "attention: power must be >= 1");
  TDA_CHECK(a.q_start >= 0 && a.q_start <= a.T, "attention: q_start outside [0, T]");
  TDA_CHECK(fa::max_head_dim(a) <= fa::kMaxHeadDim,
            "cuda backend: attention head dim above " + std::to_string(fa::kMaxHeadDim));
}

AttnArgs normalise(const AttnArgs& in) {
  AttnArgs a = in;
  if (a.math == AttnMath::kRelu || a.math == AttnMath::kDiffRelu) {
    a.tau = nullptr;
    a.power = 1;
  }
  return a;
}
}  // namespace

void attention_forward(const AttnArgs& in, uint16_t* operands) {
  check_args(in, false);
  const AttnArgs a = normalise(in);
  attention_tiled_forward(a, operands);
}

size_t attention_backward_scratch(const AttnArgs& a) {
  return 2 * size_t(a.B) * a.H * a.T;  // D1, D2 per row
}

void attention_backward(const AttnArgs& in, float* scratch, uint16_t* operands, bool drop_term) {
  check_args(in, in.saved != nullptr);
  const AttnArgs a = normalise(in);
  TDA_CHECK(a.dout && a.dq && a.dk && a.dv, "attention: backward needs dout, dq, dk, dv");
  TDA_CHECK(a.q_start == 0, "attention: backward needs q_start == 0 (full rows)");
  if (attn_two_views(a.math)) TDA_CHECK(a.dq2 && a.dk2, "attention: two-view math needs dq2, dk2");
  attention_tiled_backward(a, scratch, operands, drop_term);
}

}  // namespace tda::cuda
