// `relu2`: a demonstration kind, built only with -DTDA_EXTRA_ATTENTION=tests/demo/relu2.cpp
// (docs/attention.md, "Adding an attention kind"). This one file is all it takes: every suite
// then trains, exports, benchmarks and tests it with the registered kinds.
//   s_ij = q_i.k_j / sqrt(d) (after RoPE);  a_ij = max(s_ij, 0)^2 (no threshold);
//   o_i = sum_{j <= i} a_ij v_j;  y_i = HeadRMSNorm_d(o_i; gamma, eps)
// The kernel math is the threshold rectifier's (AttnMath::kThreshold) at power 2 with tau = 0;
// the head RMSNorm keeps the unnormalised sum at a usable scale. c_attn: [q | k | v].
#include <cmath>

#include "attention/common.h"
#include "attention/registry.h"

namespace tda {
namespace {

using namespace attn_util;

class Relu2Attention final : public AttentionVariant {
 public:
  Relu2Attention(const ModelConfig& m, const AttentionConfig& a)
      : C_(m.d_model), H_(m.n_head), D_(m.head_dim()), eps_(float(a.head_norm_eps)) {}
  std::string kind() const override { return "relu2"; }
  AttnMath math() const override { return AttnMath::kThreshold; }
  AttentionTraits traits() const override {
    AttentionTraits t = traits_of_math(math(), 2);
    t.empty_row_qk = {{0, C_}};  // q_0 = -k_0: s_00 < 0, row 0 has no survivor
    return t;
  }
  int proj_width() const override { return 3 * C_; }
  std::vector<ParamSpec> extra_params(int) const override {
    return {{"gamma", {D_}, ParamSpec::Init::kOnes, 0.f, false}};
  }
  size_t act_floats(int B, int T) const override {
    return 4 * size_t(B) * T * C_ + size_t(B) * H_ * T;  // q, k, v, o; the norm's rstd
  }
  size_t scratch_floats(int B, int T) const override { return 6 * size_t(B) * T * C_; }

  void forward(const AttnContext& c, const float* proj, float* y, float* act,
               const std::vector<float*>& extra) override {
    Buf s = buffers(act, c.B, c.T);
    rope_qkv_forward(c, proj, proj_width(), H_, D_, s.q, s.k, s.v);
    c.ops.attention_forward(args(c, s));
    c.ops.merge_heads(y, s.o, C_, 0, c.B, c.T, H_, D_);
    c.ops.rmsnorm_forward(y, s.rstd, y, extra[0], c.B * c.T * H_, D_, eps_);
  }

  void backward(const AttnContext& c, const float*, const float* dy, float* dproj, float* act,
                const std::vector<float*>& extra, const std::vector<float*>& dextra,
                float* scratch) override {
    Buf s = buffers(act, c.B, c.T);
    const size_t n = size_t(c.B) * c.T * C_;
    float *om = scratch, *dom = om + n, *g = dom + n, *dq = g + n, *dk = dq + n, *dv = dk + n;
    c.ops.merge_heads(om, s.o, C_, 0, c.B, c.T, H_, D_);
    c.ops.zero(dom, n);  // rmsnorm_backward accumulates
    c.ops.rmsnorm_backward(dom, dextra[0], dy, om, extra[0], s.rstd, c.B * c.T * H_, D_);
    c.ops.split_heads(g, dom, C_, 0, c.B, c.T, H_, D_);
    AttnArgs a = args(c, s);
    a.dout = g;
    a.dq = dq;
    a.dk = dk;
    a.dv = dv;
    c.ops.attention_backward(a);
    rope_qkv_backward(c, dproj, proj_width(), H_, D_, dq, dk, dv);
  }

 private:
  struct Buf {
    float *q, *k, *v, *o, *rstd;
  };
  Buf buffers(float* act, int B, int T) const {
    const size_t n = size_t(B) * T * C_;
    return Buf{act, act + n, act + 2 * n, act + 3 * n, act + 4 * n};
  }
  AttnArgs args(const AttnContext& c, const Buf& s) const {
    AttnArgs a = make_args(math(), c, H_, D_, D_, 1.f / std::sqrt(float(D_)));
    a.q = s.q;
    a.k = s.k;
    a.v = s.v;
    a.out = s.o;
    a.tau = nullptr;  // read as 0
    a.power = 2;
    return a;
  }
  int C_, H_, D_;
  float eps_;
};

}  // namespace

TDA_REGISTER_ATTENTION(
    "relu2", Relu2Attention, "ReLU^2", "demo: squared-ReLU dot-product weights, head RMSNorm", -1,
    {head_norm_eps_option()},
    "merge(rms_norm(self._relu_scores(*self._qkv(proj, ctx)[:2], 1 / math.sqrt(self.D), ctx, "
    "power=2) @ self._qkv(proj, ctx)[2], self.p('gamma'), self.a['head_norm_eps']))");

}  // namespace tda
