// Small pre/post pieces shared by several attention variants (attention-variants.md §0.1):
// L2 normalisation of q/k, the TRA/TDA row threshold, the Diff lambda_init schedule, and
// fixed-order reductions for scalar-parameter gradients (bit-exact resume).
//
// These run on host memory: the CPU backend is the only backend so far. A device backend gets
// them as fused prologue/epilogue work of its attention kernels (attention-variants.md §12).
#pragma once
#include <cmath>
#include <cstddef>

#include "attention/variant.h"
#include "backend/ops.h"

namespace tda {
namespace attn_util {

// x~ = x / max(|x|, 1e-12) row-wise over D, in place; norm[n] = |x| (F.normalize semantics).
void l2norm_forward(float* x, float* norm, size_t N, int D);
// In place, dx~ -> dx:  dx = (dx~ - x~ (x~.dx~)) / |x|   (|x| > 1e-12;  else dx = dx~ / 1e-12)
void l2norm_backward(float* dx, const float* xhat, const float* norm, size_t N, int D);

// TRA/TDA: c_i = sqrt(2 max(0, log((i+1)/kappa)) / d), tau_i = beta_eff c_i, i = 0..T-1.
void threshold_c(float* c, int T, double kappa, int d);

// Diff Transformer depth schedule, layer 0-indexed: lambda_init = 0.8 - 0.6 exp(-0.3 layer).
inline float diff_lambda_init(int layer) {
  return 0.8f - 0.6f * std::exp(-0.3f * float(layer));
}

inline float sigmoid(float x) {
  return 1.f / (1.f + std::exp(-x));
}

// sum_n x[n] in double, serially (fixed order).
double serial_sum(const float* x, size_t n);
// sum over rows r of (B, H, T) of w[t] * x[r], serially: dbeta = sum_{b,h,i} c_i dtau_i.
double weighted_row_sum(const float* x, const float* w, int BH, int T);

// (B*T*H', C') slice views of (B, H', T, D') tensors are handled by ops.merge/split_heads;
// this fills the fields every variant sets the same way.
inline AttnArgs make_args(AttnMath m, int B, int H, int T, int Dqk, int Dv, float scale) {
  AttnArgs a;
  a.math = m;
  a.B = B;
  a.H = H;
  a.T = T;
  a.Dqk = Dqk;
  a.Dv = Dv;
  a.scale = scale;
  return a;
}
// Same, with batch, length and the first computed query row (KV-cache decoding) from `c`.
inline AttnArgs make_args(AttnMath m, const AttnContext& c, int H, int Dqk, int Dv, float scale) {
  AttnArgs a = make_args(m, c.B, H, c.T, Dqk, Dv, scale);
  a.q_start = c.q_start;
  return a;
}

}  // namespace attn_util
}  // namespace tda
