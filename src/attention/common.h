// Small pieces shared by several attention variants (attention-variants.md §0.1): the TRA/TDA
// row threshold and the Diff lambda_init schedule. The per-element pre/post work (L2 norms,
// gates, output norms, reductions of scalar-parameter gradients) is in the Ops interface
// (backend/ops.h), so every variant runs on any backend's memory; so are the small parameters
// that set kernel arguments (TDA's and the Diff kinds' lambda, dex's lambda, ssmax's factors),
// computed into device scalars (clamp_affine, diff_lambda, position_scales), never read on the
// host.
#pragma once
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "attention/variant.h"
#include "backend/ops.h"
#include "backend/slots.h"

namespace tda {
namespace attn_util {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The common [q | k | v] layout of c_attn: q, k, v at columns 0, H D, 2 H D of proj (row width
// W), H heads of D. Forward: q, k rotated (RoPE at c.pos0) and v split into (B, H, T, D).
// Backward: the transpose, written into dproj's three column blocks. dq_scale: the row scale of
// a query the kernel scaled as it read it (AttnArgs::q_scale, same layout), dq being d/dq': the
// gradient of q is dq_scale dq, applied as RoPE's transpose reads dq.
void rope_qkv_forward(const AttnContext& c, const float* proj, int W, int H, int D, float* q,
                      float* k, float* v);
void rope_qkv_backward(const AttnContext& c, float* dproj, int W, int H, int D, const float* dq,
                       const float* dk, const float* dv, const float* dq_scale = nullptr,
                       int dq_scale_h_stride = 0);

// dtype bf16 (AttentionVariant::save_bf16_operands): a kind that keeps the attention kernel's
// bf16 copies of q, k, v (AttnArgs::saved) instead of its fp32 q, k, v. The floats the copies
// take in its saved activations (two bf16 per float), as `by` sizes them for that shape:
size_t saved_operand_floats(const Bf16Matmuls& by, AttnMath m, int B, int H, int T, int Dqk,
                            int Dv);
// Where its forward computes q, k, v (n floats each) instead: the start of c.scratch, the
// backward's scratch, free until then (AttnContext::scratch; an error naming `kind` if unset).
void qkv_in_scratch(const AttnContext& c, const std::string& kind, size_t n, float** q, float** k,
                    float** v);
// That scratch itself, for a kind that carves its own operands there (tda).
float* forward_scratch(const AttnContext& c, const std::string& kind);
// The backend's capability, for a backward that reads the copies beyond the kernel (tra and tda's
// L2 norms: Bf16Matmuls::l2norm_backward_saved); an error naming `kind` if it has none.
Bf16Matmuls& saved_operands_of(const AttnContext& c, const std::string& kind);

// HeadRMSNorm after the kernel (tra, tda, the Diff kinds): o (B, H, T, Dv) merged into y
// (B*T, H Dv), each (token, head) row of Dv normalised in place with gamma (Dv); rstd (B*T*H)
// saved. The backward writes g (B, H, T, Dv), the gradient of o, from dy (B*T, H Dv; g may be
// dy), accumulates dgamma, and uses om and dom (B*T*H*Dv floats each) as scratch.
void head_norm_forward(const AttnContext& c, float* y, float* rstd, const float* o,
                       const float* gamma, int H, int Dv, float eps);
void head_norm_backward(const AttnContext& c, float* g, float* dgamma, const float* dy,
                        const float* o, const float* gamma, const float* rstd, int H, int Dv,
                        float* om, float* dom);

// TRA/TDA: c_i = sqrt(2 max(0, log((i+1)/kappa)) / d), tau_i = beta_eff c_i, i = 0..T-1.
void threshold_c(float* c, int T, double kappa, int d);

// Options several kinds read, declared once (two declarations of a key must agree).
inline AttentionOptionSpec head_norm_eps_option() {
  return {"head_norm_eps", 1e-5, "epsilon of the per-head output RMSNorm", 0, kInf, false};
}
// TRA and TDA's threshold tau_i = max(beta, 0) sqrt(2 max(0, log((i+1)/kappa)) / d) and power.
inline std::vector<AttentionOptionSpec> threshold_options() {
  return {{"beta", 1.0, "threshold scale (its initial value when learn_beta)"},
          {"kappa", 1.0, "expected spurious survivors per row the threshold allows", 0, kInf,
           false},  // log((i+1)/kappa)
          {"power", 2, "p of the weight max(s - tau, 0)^p (an integer >= 1)", 1, kInf},
          {"learn_beta", true, "beta is a learnable parameter per layer (else fixed)"},
          head_norm_eps_option()};
}

// Their values, as TRA and TDA read them.
struct ThresholdOptions {
  double beta, kappa, head_norm_eps;
  int power;
  bool learn_beta;
};
inline ThresholdOptions read_threshold_options(const AttentionConfig& a) {
  return {a.option<double>("beta"), a.option<double>("kappa"), a.option<double>("head_norm_eps"),
          a.option<int>("power"), a.option<bool>("learn_beta")};
}

// Diff Transformer depth schedule, layer 0-indexed: lambda_init = 0.8 - 0.6 exp(-0.3 layer).
inline float diff_lambda_init(int layer) {
  return 0.8f - 0.6f * std::exp(-0.3f * float(layer));
}

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

// The saved activations of a kind with one view of q, k, v (backend/slots.h): rotated q, k and
// v and the output o in (B, H, T, D), n floats each, and the kernel's row statistics. `saved`:
// the kernel's bf16 copies of q, k, v (AttnArgs::saved) for a kind that keeps those instead.
struct QkvAct {
  float *q, *k, *v, *o, *stats, *saved;
};
inline SlotTable<QkvAct> qkv_act_slots(size_t n, size_t n_stats) {
  return {{&QkvAct::q, n},
          {&QkvAct::k, n},
          {&QkvAct::v, n},
          {&QkvAct::o, n},
          {&QkvAct::stats, n_stats}};
}
// The backward buffers of a kind with one view of q, k, v (backend/slots.h): the output gradient
// in heads (g) and the kernel's dq, dk, dv, n floats each.
struct QkvGrads {
  float *g, *dq, *dk, *dv;
};
inline SlotTable<QkvGrads> qkv_grad_slots(size_t n) {
  return {{&QkvGrads::g, n}, {&QkvGrads::dq, n}, {&QkvGrads::dk, n}, {&QkvGrads::dv, n}};
}
// `a` with a backward's buffers set from any struct with members g, dq, dk, dv.
template <class W>
AttnArgs with_grads(AttnArgs a, const W& w) {
  a.dout = w.g;
  a.dq = w.dq;
  a.dk = w.dk;
  a.dv = w.dv;
  return a;
}

}  // namespace attn_util
}  // namespace tda
