#include "attention/common.h"

#include <algorithm>

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
  for (int i = 0; i < T; ++i) {
    // max(0, .) guards kappa > 1 (the released code hard-wires kappa = 1)
    const double l = std::max(0.0, std::log(double(i + 1) / kappa));
    c[i] = float(std::sqrt(2.0 * l / d));
  }
}

void upload_threshold(Ops& ops, float* dst, int T, double kappa, int d, float factor) {
  std::vector<float> c(size_t(std::max(T, 0)));
  threshold_c(c.data(), T, kappa, d);
  for (float& x : c) x *= factor;
  ops.upload(dst, c.data(), c.size() * sizeof(float));
}

}  // namespace attn_util
}  // namespace tda
