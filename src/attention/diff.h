// `diff_softmax` (Differential Transformer, Ye et al. 2024; attention-variants.md §7) and
// `diff_rela` (the same construction with ReLU weights; §9, ASSUMED layout).
// Heads: H' = H/2. q and k have C columns = 2H' components of d' = C/H; components 2h and 2h+1
// are head h's (q1, q2) and (k1, k2). v has H' heads of width 2d'.
//   diff_softmax: A^t = softmax_j(q^t_i.k^t_j / sqrt(d'));  diff_rela: a^t = max(q^t.k^t/sqrt(d'),
//   0) lambda = exp(lq1.lk1) - exp(lq2.lk2) + lambda_init,  lambda_init = 0.8 - 0.6 exp(-0.3 layer)
//   o^_i = sum_j (a^1_ij - lambda a^2_ij) v_j  (2d');  y_i = (1 - lambda_init) HeadRMSNorm(o^_i)
// Parameters: lambda_q1, lambda_k1, lambda_q2, lambda_k2 (d', N(0, 0.1^2)), gamma (2d', ones);
// shared by the heads of a layer. Norm eps = head_norm_eps (1e-5).
// Backward: g^ = (1 - lambda_init) RMSNorm-backward(dy);  the kernel returns per-row dlambda;
//   dlq1 = dlambda e^{lq1.lk1} lk1,  dlk1 = dlambda e^{lq1.lk1} lq1,  dlq2 = -dlambda e^{lq2.lk2}
//   lk2, ...
// lambda (with e1, e2) is computed on the device (Ops::diff_lambda) and read there by the
// kernels, and its gradient goes back to the four vectors there (diff_lambda_backward): no host
// read.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "attention/common.h"
#include "attention/variant.h"
#include "core/error.h"

namespace tda {

namespace attn_diff {

using namespace attn_util;

class DiffAttention : public AttentionVariant {
 public:
  DiffAttention(const ModelConfig& m, const AttentionConfig& a, bool relu)
      : C_(m.d_model),
        Hp_(m.n_head / 2),
        D_(m.head_dim()),
        eps_(float(a.option<double>("head_norm_eps"))),
        relu_(relu) {
    TDA_CHECK(m.n_head % 2 == 0, std::string("config: attention.kind ") + kind() +
                                     " needs an even model.n_head (heads are paired)");
  }
  std::string kind() const override { return relu_ ? "diff_rela" : "diff_softmax"; }
  AttnMath math() const override { return relu_ ? AttnMath::kDiffRelu : AttnMath::kDiffSoftmax; }
  AttentionTraits traits() const override {
    AttentionTraits t = traits_of_math(math(), 1);
    if (relu_) t.empty_row_qk = {{0, C_}};  // [q | k | v]: both views' heads at once
    t.head_multiple = 2;
    return t;
  }
  int proj_width() const override { return 3 * C_; }
  std::vector<ParamSpec> extra_params(int) const override {
    using I = ParamSpec::Init;
    return {{"lambda_q1", {D_}, I::kNormal, 0.1f, false},
            {"lambda_k1", {D_}, I::kNormal, 0.1f, false},
            {"lambda_q2", {D_}, I::kNormal, 0.1f, false},
            {"lambda_k2", {D_}, I::kNormal, 0.1f, false},
            {"gamma", {2 * D_}, I::kOnes, 0.f, false}};
  }
  size_t act_floats(int B, int T) const override { return slot_floats(act_slots(B, T)); }
  size_t scratch_floats(int B, int T) const override { return slot_floats(grad_slots(B, T)); }
  bool save_bf16_operands(const Bf16Matmuls& b) override {
    saved_by_ = &b;  // q, k, v kept as the kernel's bf16 copies (as qkv_attention.h)
    return true;
  }

  void forward(const AttnContext& c, const float* proj, float* y, float* act,
               const std::vector<float*>& extra) override {
    Act s = carve(act_slots(c.B, c.T), act);
    const int W = proj_width();
    if (saved_by_) qkv_in_scratch(c, kind(), size_t(c.B) * c.T * C_, &s.q, &s.k, &s.v);
    // (B, 2H', T, d'): component 2h is view 1 of head h, 2h+1 view 2
    c.ops.rope_forward(s.q, proj, W, 0, c.cos, c.sin, c.B, c.T, 2 * Hp_, D_, c.pos0);
    c.ops.rope_forward(s.k, proj, W, C_, c.cos, c.sin, c.B, c.T, 2 * Hp_, D_, c.pos0);
    c.ops.split_heads(s.v, proj, W, 2 * C_, c.B, c.T, Hp_, 2 * D_);
    c.ops.diff_lambda(s.lam, extra[0], extra[1], extra[2], extra[3], D_,
                      diff_lambda_init(c.layer));  // kept for the backward
    AttnArgs a = args(c, s);
    c.ops.attention_forward(a);
    // y = (1 - lambda_init) RMSNorm_{2d'}(o^): merged (token, head) rows of 2d'
    head_norm_forward(c, y, s.rstd, s.o, extra[4], Hp_, 2 * D_, eps_);
    c.ops.scale(y, size_t(c.B) * c.T * C_, 1.f - diff_lambda_init(c.layer));
  }

  void backward(const AttnContext& c, const float*, const float* dy, float* dproj, float* act,
                const std::vector<float*>& extra, const std::vector<float*>& dextra,
                float* scratch) override {
    const Act s = carve(act_slots(c.B, c.T), act);
    const Grads g = carve(grad_slots(c.B, c.T), scratch);
    const size_t n = size_t(c.B) * c.T * C_;
    const int W = proj_width();
    c.ops.axpby(g.g, 1.f - diff_lambda_init(c.layer), dy, 0.f, n);  // g = (1 - lambda_init) dy
    head_norm_backward(c, g.g, dextra[4], g.g, s.o, extra[4], s.rstd, Hp_, 2 * D_, g.om, g.dom);
    AttnArgs a = with_grads(args(c, s), g);
    a.dq2 = g.dq + size_t(c.T) * D_;  // the views' components 2h, 2h+1 of one buffer
    a.dk2 = g.dk + size_t(c.T) * D_;
    a.drow_lambda = g.dlam;
    c.ops.attention_backward(a);
    // lambda re-parameterisation: lambda = e1 - e2 + lambda_init, e_t = exp(lq_t . lk_t)
    c.ops.zero(g.dl_sum, 1);
    c.ops.head_row_sum(g.dl_sum, g.dlam, nullptr, 1.f, int(c.B * Hp_), 1, c.T);
    c.ops.diff_lambda_backward(dextra[0], dextra[1], dextra[2], dextra[3], extra[0], extra[1],
                               extra[2], extra[3], s.lam, g.dl_sum, D_);
    c.ops.rope_backward(dproj, g.dq, W, 0, c.cos, c.sin, c.B, c.T, 2 * Hp_, D_, c.pos0, nullptr, 0);
    c.ops.rope_backward(dproj, g.dk, W, C_, c.cos, c.sin, c.B, c.T, 2 * Hp_, D_, c.pos0, nullptr,
                        0);
    c.ops.merge_heads(dproj, g.dv, W, 2 * C_, c.B, c.T, Hp_, 2 * D_);
  }

 private:
  struct Act {
    float *q, *k, *v, *o, *o2, *stats, *rstd, *lam;  // lam: {e1, e2, lambda} (diff_lambda)
    float* saved;  // q, k, v's bf16 copies instead (save_bf16_operands)
  };
  SlotTable<Act> act_slots(int B, int T) const {
    const size_t n = size_t(B) * T * C_, nr = size_t(B) * Hp_ * T;
    if (saved_by_)
      return {{&Act::o, n},
              {&Act::o2, n},
              {&Act::stats, 2 * nr},
              {&Act::rstd, nr},
              {&Act::lam, 3},
              {&Act::saved, saved_operand_floats(*saved_by_, math(), B, Hp_, T, D_, 2 * D_)}};
    return {{&Act::q, n},  {&Act::k, n},          {&Act::v, n},     {&Act::o, n},
            {&Act::o2, n}, {&Act::stats, 2 * nr}, {&Act::rstd, nr}, {&Act::lam, 3}};
  }
  struct Grads {
    float *om, *dom, *g, *dq, *dk, *dv, *dlam, *dl_sum;
  };
  SlotTable<Grads> grad_slots(int B, int T) const {
    const size_t n = size_t(B) * T * C_;
    return {{&Grads::om, n},
            {&Grads::dom, n},
            {&Grads::g, n},
            {&Grads::dq, n},
            {&Grads::dk, n},
            {&Grads::dv, n},
            {&Grads::dlam, size_t(B) * Hp_ * T},
            {&Grads::dl_sum, 1}};
  }
  AttnArgs args(const AttnContext& c, const Act& s) const {
    AttnArgs a = make_args(math(), c, Hp_, D_, 2 * D_, 1.0f / std::sqrt(float(D_)));
    a.q = s.q;
    a.k = s.k;
    if (s.q) {  // null in the backward of a forward that saved the copies
      a.q2 = s.q + size_t(c.T) * D_;
      a.k2 = s.k + size_t(c.T) * D_;
    }
    a.qk_bh_stride = 2 * size_t(c.T) * D_;  // head h = components 2h, 2h+1 of (B, 2H', T, d')
    a.v = s.v;
    a.out = s.o;
    a.out2 = s.o2;
    a.stats = s.stats;
    a.power = 1;
    a.lambda = s.lam + 2;
    a.saved = reinterpret_cast<uint16_t*>(s.saved);
    return a;
  }
  int C_, Hp_, D_;
  float eps_;
  bool relu_;
  const Bf16Matmuls* saved_by_ = nullptr;
};

}  // namespace attn_diff
}  // namespace tda
