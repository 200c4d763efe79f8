// `tra`: Threshold Rectified Attention (attention-variants.md §10).
//   q~, k~ = L2-normalised q, k after RoPE;  s_ij = q~_i.k~_j (cosine, no 1/sqrt(d))
//   c_i = sqrt(2 max(0, log((i+1)/kappa)) / d);  tau_i = max(beta, 0) c_i
//   a_ij = max(s_ij - tau_i, 0)^p;  o_i = sum_j a_ij v_j;  y_i = HeadRMSNorm_d(o_i; gamma, eps)
// c_attn rows: [q (C) | k (C) | v (C)]. Parameters: beta (1, learnable unless learn_beta is
// false; ASSUMED per layer), gamma (d, shared by the heads; ASSUMED).
// Saved: q~, k~, v, o (B,H,T,D), |q|, |k| (B,H,T), the norm's rstd (B*T*H), tau (T).
#include <algorithm>
#include <cmath>

#include "attention/common.h"
#include "attention/registry.h"

namespace tda {

namespace {

using namespace attn_util;

class TraAttention final : public AttentionVariant {
 public:
  TraAttention(const ModelConfig& m, const AttentionConfig& a)
      : C_(m.d_model), H_(m.n_head), D_(m.head_dim()), cfg_(a) {}
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
  size_t act_floats(int B, int T) const override {
    const size_t n = size_t(B) * T * C_, nr = size_t(B) * H_ * T;
    return 4 * n + 3 * nr + size_t(T);
  }
  size_t scratch_floats(int B, int T) const override {
    return 6 * size_t(B) * T * C_ + size_t(B) * H_ * T + size_t(T);
  }

  void forward(const AttnContext& c, const float* proj, float* y, float* act,
               const std::vector<float*>& extra) override {
    Buf s = buffers(act, c.B, c.T);
    const int W = proj_width();
    const size_t nr = size_t(c.B) * H_ * c.T;
    rope_qkv_forward(c, proj, W, H_, D_, s.q, s.k, s.v);
    c.ops.l2norm_forward(s.q, s.qn, nr, D_);  // RoPE preserves norms: normalise after it
    c.ops.l2norm_forward(s.k, s.kn, nr, D_);
    // tau_i = max(beta, 0) c_i (tau >= 0), on the device from the device beta
    c.ops.threshold_tau(s.tau, beta(extra), float(cfg_.beta), false, c.T, cfg_.kappa, D_);
    AttnArgs a = args(c, s);
    c.ops.attention_forward(a);
    // y = HeadRMSNorm(o): merge first, then normalise each (token, head) row of D in place
    c.ops.merge_heads(y, s.o, C_, 0, c.B, c.T, H_, D_);
    c.ops.rmsnorm_forward(y, s.rstd, y, gamma(extra), c.B * c.T * H_, D_,
                          float(cfg_.head_norm_eps));
  }

  void backward(const AttnContext& c, const float*, const float* dy, float* dproj, float* act,
                const std::vector<float*>& extra, const std::vector<float*>& dextra,
                float* scratch) override {
    Buf s = buffers(act, c.B, c.T);
    const size_t n = size_t(c.B) * c.T * C_, nr = size_t(c.B) * H_ * c.T;
    float *om = scratch, *dom = om + n, *g = dom + n, *dq = g + n, *dk = dq + n, *dv = dk + n;
    float *dtau = dv + n, *cc = dtau + nr;
    const int W = proj_width();
    // g = HeadRMSNorm backward (dom accumulates, so zero it first)
    c.ops.merge_heads(om, s.o, C_, 0, c.B, c.T, H_, D_);
    c.ops.zero(dom, n);
    c.ops.rmsnorm_backward(dom, dgamma(dextra), dy, om, gamma(extra), s.rstd, c.B * c.T * H_, D_);
    c.ops.split_heads(g, dom, C_, 0, c.B, c.T, H_, D_);
    AttnArgs a = args(c, s);
    a.dout = g;
    a.dq = dq;
    a.dk = dk;
    a.dv = dv;
    a.drow_tau = dtau;
    c.ops.attention_backward(a);
    // dbeta = sum_{b,h,i} c_i dL/dtau_i, only while beta > 0 (beta_eff = max(beta, 0))
    if (cfg_.learn_beta) {  // weights [beta > 0] c_i: no gradient while beta <= 0
      c.ops.threshold_tau(cc, beta(extra), 0.f, true, c.T, cfg_.kappa, D_);
      c.ops.head_row_sum(dextra[0], dtau, cc, 1.f, c.B * H_, 1, c.T);
    }
    c.ops.l2norm_backward(dq, s.q, s.qn, nr, D_);
    c.ops.l2norm_backward(dk, s.k, s.kn, nr, D_);
    rope_qkv_backward(c, dproj, W, H_, D_, dq, dk, dv);
  }

 private:
  struct Buf {
    float *q, *k, *v, *o, *qn, *kn, *rstd, *tau;
  };
  Buf buffers(float* act, int B, int T) const {
    const size_t n = size_t(B) * T * C_, nr = size_t(B) * H_ * T;
    float* p = act + 4 * n;
    return Buf{act, act + n, act + 2 * n, act + 3 * n, p, p + nr, p + 2 * nr, p + 3 * nr};
  }
  const float* beta(const std::vector<float*>& extra) const {  // null: the fixed cfg_.beta
    return cfg_.learn_beta ? extra[0] : nullptr;
  }
  const float* gamma(const std::vector<float*>& extra) const {
    return extra[cfg_.learn_beta ? 1 : 0];
  }
  float* dgamma(const std::vector<float*>& dextra) const { return dextra[cfg_.learn_beta ? 1 : 0]; }
  AttnArgs args(const AttnContext& c, const Buf& s) const {
    AttnArgs a = make_args(math(), c, H_, D_, D_, 1.0f);  // cosine scores
    a.q = s.q;
    a.k = s.k;
    a.v = s.v;
    a.out = s.o;
    a.tau = s.tau;
    a.power = cfg_.power;
    return a;
  }
  int C_, H_, D_;
  AttentionConfig cfg_;
};

}  // namespace

TDA_REGISTER_ATTENTION(
    "tra", TraAttention, "TRA",
    "Threshold Rectified Attention: cosine scores, a length-aware threshold, a power", 9,
    attn_util::threshold_options());

}  // namespace tda
