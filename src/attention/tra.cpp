// `tra`: Threshold Rectified Attention (attention-variants.md §10).
//   q~, k~ = L2-normalised q, k after RoPE;  s_ij = q~_i.k~_j (cosine, no 1/sqrt(d))
//   c_i = sqrt(2 max(0, log((i+1)/kappa)) / d);  tau_i = max(beta, 0) c_i
//   a_ij = max(s_ij - tau_i, 0)^p;  o_i = sum_j a_ij v_j;  y_i = HeadRMSNorm_d(o_i; gamma, eps)
// c_attn rows: [q (C) | k (C) | v (C)]. Parameters: beta (1, learnable unless learn_beta is
// false; ASSUMED per layer), gamma (d, shared by the heads; ASSUMED).
// Saved: q~, k~, v, o (B,H,T,D), |q|, |k| (B,H,T), the norm's rstd (B*T*H), tau (T). Under dtype
// bf16 (save_bf16_operands) q~, k~, v are the kernel's bf16 copies instead, and the L2 norms'
// backward reads x~ from them (Bf16Matmuls::l2norm_backward_saved): x~ rounded to bf16, the
// operand the scores were computed from, where the fp32 path has x~ itself.
#include <algorithm>
#include <cmath>

#include "attention/common.h"
#include "attention/registry.h"
#include "backend/mixed_precision.h"

namespace tda {

namespace {

using namespace attn_util;

class TraAttention final : public AttentionVariant {
 public:
  TraAttention(const ModelConfig& m, const AttentionConfig& a)
      : C_(m.d_model), H_(m.n_head), D_(m.head_dim()), cfg_(read_threshold_options(a)) {}
  std::string kind() const override { return "tra"; }
  AttnMath math() const override { return AttnMath::kThreshold; }
  AttentionTraits traits() const override {
    AttentionTraits t = traits_of_math(math(), cfg_.power);
    t.empty_row_qk = {{0, C_}};
    return t;
  }
  int proj_width() const override { return 3 * C_; }
  std::vector<ParamSpec> extra_params(int) const override {
    std::vector<ParamSpec> p;
    if (cfg_.learn_beta)
      p.push_back({"beta", {1}, ParamSpec::Init::kConst, float(cfg_.beta), false});
    p.push_back({"gamma", {D_}, ParamSpec::Init::kOnes, 0.f, false});
    return p;
  }
  size_t act_floats(int B, int T) const override { return slot_floats(act_slots(B, T)); }
  size_t scratch_floats(int B, int T) const override { return slot_floats(grad_slots(B, T)); }
  bool save_bf16_operands(const Bf16Matmuls& b) override {
    saved_by_ = &b;
    return true;
  }

  void forward(const AttnContext& c, const float* proj, float* y, float* act,
               const std::vector<float*>& extra) override {
    Act s = carve(act_slots(c.B, c.T), act);
    const int W = proj_width();
    const size_t nr = size_t(c.B) * H_ * c.T;
    if (saved_by_) qkv_in_scratch(c, kind(), size_t(c.B) * c.T * C_, &s.q, &s.k, &s.v);
    rope_qkv_forward(c, proj, W, H_, D_, s.q, s.k, s.v);
    c.ops.l2norm_forward(s.q, s.qn, nr, D_);  // RoPE preserves norms: normalise after it
    c.ops.l2norm_forward(s.k, s.kn, nr, D_);
    // tau_i = max(beta, 0) c_i (tau >= 0), on the device from the device beta
    c.ops.threshold_tau(s.tau, beta(extra), float(cfg_.beta), false, c.T, cfg_.kappa, D_);
    AttnArgs a = args(c, s);
    c.ops.attention_forward(a);
    head_norm_forward(c, y, s.rstd, s.o, gamma(extra), H_, D_, float(cfg_.head_norm_eps));
  }

  void backward(const AttnContext& c, const float*, const float* dy, float* dproj, float* act,
                const std::vector<float*>& extra, const std::vector<float*>& dextra,
                float* scratch) override {
    const Act s = carve(act_slots(c.B, c.T), act);
    const Grads g = carve(grad_slots(c.B, c.T), scratch);
    const size_t nr = size_t(c.B) * H_ * c.T;
    const int W = proj_width();
    head_norm_backward(c, g.g, dgamma(dextra), dy, s.o, gamma(extra), s.rstd, H_, D_, g.om, g.dom);
    AttnArgs a = with_grads(args(c, s), g);
    a.drow_tau = g.dtau;
    c.ops.attention_backward(a);
    // dbeta = sum_{b,h,i} c_i dL/dtau_i, only while beta > 0 (beta_eff = max(beta, 0))
    if (cfg_.learn_beta) {  // weights [beta > 0] c_i: no gradient while beta <= 0
      c.ops.threshold_tau(g.cc, beta(extra), 0.f, true, c.T, cfg_.kappa, D_);
      c.ops.head_row_sum(dextra[0], g.dtau, g.cc, 1.f, c.B * H_, 1, c.T);
    }
    if (saved_by_) {  // x~ from the kernel's copies
      Bf16Matmuls& b = saved_operands_of(c, kind());
      b.l2norm_backward_saved(g.dq, a, AttnOperand::kQ, s.qn);
      b.l2norm_backward_saved(g.dk, a, AttnOperand::kK, s.kn);
    } else {
      c.ops.l2norm_backward(g.dq, s.q, s.qn, nr, D_);
      c.ops.l2norm_backward(g.dk, s.k, s.kn, nr, D_);
    }
    rope_qkv_backward(c, dproj, W, H_, D_, g.dq, g.dk, g.dv);
  }

 private:
  struct Act {
    float *q, *k, *v, *o, *qn, *kn, *rstd, *tau;  // qn, kn: |q|, |k| per row; tau (T)
    float* saved;  // q~, k~, v's bf16 copies instead (save_bf16_operands)
  };
  SlotTable<Act> act_slots(int B, int T) const {
    const size_t n = size_t(B) * T * C_, nr = size_t(B) * H_ * T;
    if (saved_by_)
      return {{&Act::o, n},
              {&Act::qn, nr},
              {&Act::kn, nr},
              {&Act::rstd, nr},
              {&Act::tau, size_t(T)},
              {&Act::saved, saved_operand_floats(*saved_by_, math(), B, H_, T, D_, D_)}};
    return {{&Act::q, n},   {&Act::k, n},   {&Act::v, n},     {&Act::o, n},
            {&Act::qn, nr}, {&Act::kn, nr}, {&Act::rstd, nr}, {&Act::tau, size_t(T)}};
  }
  struct Grads {
    float *om, *dom, *g, *dq, *dk, *dv, *dtau, *cc;  // cc: the weights of dbeta (T)
  };
  SlotTable<Grads> grad_slots(int B, int T) const {
    const size_t n = size_t(B) * T * C_, nr = size_t(B) * H_ * T;
    return {{&Grads::om, n}, {&Grads::dom, n}, {&Grads::g, n},     {&Grads::dq, n},
            {&Grads::dk, n}, {&Grads::dv, n},  {&Grads::dtau, nr}, {&Grads::cc, size_t(T)}};
  }
  const float* beta(const std::vector<float*>& extra) const {  // null: the fixed cfg_.beta
    return cfg_.learn_beta ? extra[0] : nullptr;
  }
  const float* gamma(const std::vector<float*>& extra) const {
    return extra[cfg_.learn_beta ? 1 : 0];
  }
  float* dgamma(const std::vector<float*>& dextra) const { return dextra[cfg_.learn_beta ? 1 : 0]; }
  AttnArgs args(const AttnContext& c, const Act& s) const {
    AttnArgs a = make_args(math(), c, H_, D_, D_, 1.0f);  // cosine scores
    a.q = s.q;
    a.k = s.k;
    a.v = s.v;
    a.out = s.o;
    a.tau = s.tau;
    a.power = cfg_.power;
    a.saved = reinterpret_cast<uint16_t*>(s.saved);
    return a;
  }
  int C_, H_, D_;
  ThresholdOptions cfg_;
  const Bf16Matmuls* saved_by_ = nullptr;  // set: q~, k~, v saved as the kernel's bf16 copies
};

}  // namespace

TDA_REGISTER_ATTENTION(
    "tra", TraAttention, "TRA",
    "Threshold Rectified Attention: cosine scores, a length-aware threshold, a power", 9,
    attn_util::threshold_options());

}  // namespace tda
