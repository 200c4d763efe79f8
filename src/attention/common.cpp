#include "attention/common.h"

#include "attention/policies.h"

namespace tda {
namespace attn_util {

void rope_qkv_forward(const AttnContext& c, const float* proj, int W, int H, int D, float* q,
                      float* k, float* v) {
  const int C = H * D;
  c.ops.rope_forward(q, proj, W, 0, c.cos, c.sin, c.B, c.T, H, D, c.pos0);
  c.ops.rope_forward(k, proj, W, C, c.cos, c.sin, c.B, c.T, H, D, c.pos0);
  c.ops.split_heads(v, proj, W, 2 * C, c.B, c.T, H, D);
}

void rope_qkv_backward(const AttnContext& c, float* dproj, int W, int H, int D, const float* dq,
                       const float* dk, const float* dv) {
  const int C = H * D;
  c.ops.rope_backward(dproj, dq, W, 0, c.cos, c.sin, c.B, c.T, H, D, c.pos0);
  c.ops.rope_backward(dproj, dk, W, C, c.cos, c.sin, c.B, c.T, H, D, c.pos0);
  c.ops.merge_heads(dproj, dv, W, 2 * C, c.B, c.T, H, D);
}

void threshold_c(float* c, int T, double kappa, int d) {
  for (int i = 0; i < T; ++i) c[i] = attn::threshold_c(i, kappa, d);
}

}  // namespace attn_util
}  // namespace tda
