// `rela`: rectified linear attention (Zhang, Titov, Sennrich 2021; attention-variants.md §6).
//   a_ij = max(s_ij, 0), s_ij = q_i.k_j / sqrt(d) (j <= i);  o_i^h = sum_j a_ij v_j
//   u_i = concat_h o_i^h (C);  r_i = sqrt(mean(u_i^2) + eps)
//   rela_norm "gated_rmsnorm" (default, the official ReLA-g):  y = gamma * u / r * sigmoid(w * u)
//             "rmsnorm":                                      y = gamma * u / r
//             "layernorm" (no bias, ASSUMED):   y = gamma * (u - mu) / sqrt(var + eps)
// The norm spans all heads of a token. Parameters: gamma (C, init 1), w (C, gated only,
// U(+-sqrt(3/C)) = TF Glorot for a vector, ASSUMED). eps = rela_eps (1e-6, ASSUMED).
// Gated backward (sg = sigmoid(w u), tot = sum_e dy_e gamma_e u_e sg_e):
//   du_c = dy_c gamma_c [sg_c / r + (u_c / r) sg_c (1 - sg_c) w_c] - u_c tot / (C r^3)
//   dgamma_c += dy_c u_c sg_c / r;  dw_c += dy_c gamma_c (u_c / r) sg_c (1 - sg_c) u_c
// A token whose heads are all switched off has u = 0, hence y = 0.
#include <cmath>

#include "attention/common.h"
#include "attention/registry.h"
#include "core/error.h"

namespace tda {

namespace {

using namespace attn_util;

class RelaAttention final : public AttentionVariant {
 public:
  enum class Norm { kGated, kRms, kLayer };
  RelaAttention(const ModelConfig& m, const AttentionConfig& a)
      : C_(m.d_model), H_(m.n_head), D_(m.head_dim()), eps_(float(a.option<double>("rela_eps"))) {
    const auto norm = a.option<std::string>("rela_norm");
    if (norm == "gated_rmsnorm")
      norm_ = Norm::kGated;
    else if (norm == "rmsnorm")
      norm_ = Norm::kRms;
    else if (norm == "layernorm")
      norm_ = Norm::kLayer;
    else
      throw Error(
          "config: attention.rela_norm must be \"gated_rmsnorm\", \"rmsnorm\" or "
          "\"layernorm\", got \"" +
          norm + "\"");
  }
  std::string kind() const override { return "rela"; }
  AttnMath math() const override { return AttnMath::kRelu; }
  AttentionTraits traits() const override {
    AttentionTraits t = traits_of_math(math(), 1);
    t.empty_row_qk = {{0, C_}};
    return t;
  }
  int proj_width() const override { return 3 * C_; }
  std::vector<ParamSpec> extra_params(int) const override {
    std::vector<ParamSpec> p{{"norm_gamma", {C_}, ParamSpec::Init::kOnes, 0.f, false}};
    if (norm_ == Norm::kGated)
      p.push_back({"norm_gate", {C_}, ParamSpec::Init::kUniform, std::sqrt(3.f / C_), false});
    return p;
  }
  size_t act_floats(int B, int T) const override { return slot_floats(act_slots(B, T)); }
  size_t scratch_floats(int B, int T) const override { return slot_floats(grad_slots(B, T)); }
  bool save_bf16_operands(const Bf16Matmuls& b) override {
    saved_by_ = &b;  // q, k, v kept as the kernel's bf16 copies (qkv_attention.h does the same)
    return true;
  }

  void forward(const AttnContext& c, const float* proj, float* y, float* act,
               const std::vector<float*>& extra) override {
    Act s = carve(act_slots(c.B, c.T), act);
    const int W = proj_width();
    if (saved_by_) qkv_in_scratch(c, kind(), size_t(c.B) * c.T * C_, &s.q, &s.k, &s.v);
    rope_qkv_forward(c, proj, W, H_, D_, s.q, s.k, s.v);
    AttnArgs a = args(c, s);
    c.ops.attention_forward(a);
    c.ops.merge_heads(s.u, s.o, C_, 0, c.B, c.T, H_, D_);
    const float* w = norm_ == Norm::kGated ? extra[1] : nullptr;
    c.ops.rela_norm_forward(y, s.r, s.mu, s.u, extra[0], w, c.B * c.T, C_, eps_,
                            norm_ == Norm::kLayer);
  }

  void backward(const AttnContext& c, const float*, const float* dy, float* dproj, float* act,
                const std::vector<float*>& extra, const std::vector<float*>& dextra,
                float* scratch) override {
    const Act s = carve(act_slots(c.B, c.T), act);
    const Grads g = carve(grad_slots(c.B, c.T), scratch);
    const float* w = norm_ == Norm::kGated ? extra[1] : nullptr;
    const int W = proj_width();
    c.ops.rela_norm_backward(g.du, dextra[0], w ? dextra[1] : nullptr, dy, s.u, s.r, s.mu, extra[0],
                             w, c.B * c.T, C_, norm_ == Norm::kLayer);
    c.ops.split_heads(g.g, g.du, C_, 0, c.B, c.T, H_, D_);
    c.ops.attention_backward(with_grads(args(c, s), g));
    rope_qkv_backward(c, dproj, W, H_, D_, g.dq, g.dk, g.dv);
  }

 private:
  struct Act {
    float *q, *k, *v, *o, *u, *r, *mu;  // u: o merged (B*T, C), the norm's input; r, mu per token
    float* saved;                       // q, k, v's bf16 copies instead (save_bf16_operands)
  };
  SlotTable<Act> act_slots(int B, int T) const {
    const size_t n = size_t(B) * T * C_, nt = size_t(B) * T;
    if (saved_by_)
      return {{&Act::o, n},
              {&Act::u, n},
              {&Act::r, nt},
              {&Act::mu, nt},
              {&Act::saved, saved_operand_floats(*saved_by_, math(), B, H_, T, D_, D_)}};
    return {{&Act::q, n}, {&Act::k, n},  {&Act::v, n},  {&Act::o, n},
            {&Act::u, n}, {&Act::r, nt}, {&Act::mu, nt}};
  }
  struct Grads {
    float *du, *g, *dq, *dk, *dv;
  };
  SlotTable<Grads> grad_slots(int B, int T) const {
    const size_t n = size_t(B) * T * C_;
    return {{&Grads::du, n}, {&Grads::g, n}, {&Grads::dq, n}, {&Grads::dk, n}, {&Grads::dv, n}};
  }
  AttnArgs args(const AttnContext& c, const Act& s) const {
    AttnArgs a = make_args(math(), c, H_, D_, D_, 1.0f / std::sqrt(float(D_)));
    a.q = s.q;
    a.k = s.k;
    a.v = s.v;
    a.out = s.o;
    a.power = 1;
    a.saved = reinterpret_cast<uint16_t*>(s.saved);
    return a;
  }
  int C_, H_, D_;
  float eps_;
  Norm norm_ = Norm::kGated;
  const Bf16Matmuls* saved_by_ = nullptr;
};

}  // namespace

TDA_REGISTER_ATTENTION(
    "rela", RelaAttention, "ReLA",
    "rectified linear attention with a normalised output (Zhang, Titov, Sennrich 2021)", 5,
    {{"rela_norm", "gated_rmsnorm", "output norm: \"gated_rmsnorm\", \"rmsnorm\" or \"layernorm\""},
     {"rela_eps", 1e-6, "epsilon of the output norm", 0, attn_util::kInf, false}});

}  // namespace tda
