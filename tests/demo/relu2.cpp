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
      : C_(m.d_model),
        H_(m.n_head),
        D_(m.head_dim()),
        eps_(float(a.option<double>("head_norm_eps"))) {}
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
  size_t act_floats(int B, int T) const override { return slot_floats(act_slots(B, T)); }
  size_t scratch_floats(int B, int T) const override { return slot_floats(grad_slots(B, T)); }

  void forward(const AttnContext& c, const float* proj, float* y, float* act,
               const std::vector<float*>& extra) override {
    const Act s = carve(act_slots(c.B, c.T), act);
    rope_qkv_forward(c, proj, proj_width(), H_, D_, s.q, s.k, s.v);
    c.ops.attention_forward(args(c, s));
    head_norm_forward(c, y, s.rstd, s.o, extra[0], H_, D_, eps_);
  }

  void backward(const AttnContext& c, const float*, const float* dy, float* dproj, float* act,
                const std::vector<float*>& extra, const std::vector<float*>& dextra,
                float* scratch) override {
    const Act s = carve(act_slots(c.B, c.T), act);
    const Grads g = carve(grad_slots(c.B, c.T), scratch);
    head_norm_backward(c, g.g, dextra[0], dy, s.o, extra[0], s.rstd, H_, D_, g.om, g.dom);
    c.ops.attention_backward(with_grads(args(c, s), g));
    rope_qkv_backward(c, dproj, proj_width(), H_, D_, g.dq, g.dk, g.dv);
  }

 private:
  // Saved activations and backward scratch, each one slot table (backend/slots.h).
  struct Act {
    float *q, *k, *v, *o, *rstd;
  };
  SlotTable<Act> act_slots(int B, int T) const {
    const size_t n = size_t(B) * T * C_;
    return {
        {&Act::q, n}, {&Act::k, n}, {&Act::v, n}, {&Act::o, n}, {&Act::rstd, size_t(B) * H_ * T}};
  }
  struct Grads {
    float *om, *dom, *g, *dq, *dk, *dv;
  };
  SlotTable<Grads> grad_slots(int B, int T) const {
    const size_t n = size_t(B) * T * C_;
    return {{&Grads::om, n}, {&Grads::dom, n}, {&Grads::g, n},
            {&Grads::dq, n}, {&Grads::dk, n},  {&Grads::dv, n}};
  }
  AttnArgs args(const AttnContext& c, const Act& s) const {
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
