#include "attention/common.h"

#include "attention/policies.h"
#include "backend/mixed_precision.h"
#include "core/error.h"

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
                       const float* dk, const float* dv, const float* dq_scale,
                       int dq_scale_h_stride) {
  const int C = H * D;
  c.ops.rope_backward(dproj, dq, W, 0, c.cos, c.sin, c.B, c.T, H, D, c.pos0, dq_scale,
                      dq_scale_h_stride);
  c.ops.rope_backward(dproj, dk, W, C, c.cos, c.sin, c.B, c.T, H, D, c.pos0, nullptr, 0);
  c.ops.merge_heads(dproj, dv, W, 2 * C, c.B, c.T, H, D);
}

void head_norm_forward(const AttnContext& c, float* y, float* rstd, const float* o,
                       const float* gamma, int H, int Dv, float eps) {
  const int C = H * Dv;
  c.ops.merge_heads(y, o, C, 0, c.B, c.T, H, Dv);
  c.ops.rmsnorm_forward(y, rstd, y, gamma, c.B * c.T * H, Dv, eps);
}

void head_norm_backward(const AttnContext& c, float* g, float* dgamma, const float* dy,
                        const float* o, const float* gamma, const float* rstd, int H, int Dv,
                        float* om, float* dom) {
  const int C = H * Dv;
  c.ops.merge_heads(om, o, C, 0, c.B, c.T, H, Dv);
  c.ops.zero(dom, size_t(c.B) * c.T * C);  // rmsnorm_backward accumulates into dx
  c.ops.rmsnorm_backward(dom, dgamma, dy, om, gamma, rstd, c.B * c.T * H, Dv);
  c.ops.split_heads(g, dom, C, 0, c.B, c.T, H, Dv);
}

void threshold_c(float* c, int T, double kappa, int d) {
  for (int i = 0; i < T; ++i) c[i] = attn::threshold_c(i, kappa, d);
}

size_t saved_operand_floats(const Bf16Matmuls& by, AttnMath m, int B, int H, int T, int Dqk,
                            int Dv) {
  return (by.attention_saved_operands(make_args(m, B, H, T, Dqk, Dv, 1.f)) + 1) / 2;
}

void qkv_in_scratch(const AttnContext& c, const std::string& kind, size_t n, float** q, float** k,
                    float** v) {
  *q = forward_scratch(c, kind);
  *k = *q + slot_padded(n);
  *v = *k + slot_padded(n);
}

float* forward_scratch(const AttnContext& c, const std::string& kind) {
  TDA_CHECK(c.scratch, kind + ": the forward needs AttnContext::scratch (dtype bf16)");
  return c.scratch;
}

Bf16Matmuls& saved_operands_of(const AttnContext& c, const std::string& kind) {
  Bf16Matmuls* b = c.ops.bf16_matmuls();
  TDA_CHECK(b, kind + ": its saved bf16 operand copies need a backend with bf16 matmuls");
  return *b;
}

}  // namespace attn_util
}  // namespace tda
