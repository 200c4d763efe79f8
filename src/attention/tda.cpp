// `tda`: Threshold Differential Attention (attention-variants.md §11).
//   view t in {1,2}: q^t, k^t with RoPE, L2-normalised;  s^t_ij = q~^t_i.k~^t_j
//   a^t_ij = max(s^t_ij - tau_i, 0)^p  (same tau_i = max(beta,0) c_i, same beta for both views)
//   lambda_c = clamp(lambda, 0, 1);  o_i = sum_j (a^1_ij - lambda_c a^2_ij) v_j  (one shared V)
//   y_i = HeadRMSNorm_d(o_i; gamma, eps)
// c_attn rows: [q1 (C) | k1 (C) | q2 (C) | k2 (C) | v (C)]: each view keeps all H heads of d
// (ASSUMED, as the released code: q1, q2, k1, k2, v of one shape). Parameters: lambda (1,
// init lambda_init = 0.5, ASSUMED per layer), beta (1, if learn_beta), gamma (d, shared).
// dlambda = -sum_ij e_ij a2_ij passes only for 0 <= lambda <= 1 (torch.clamp semantics).
// lambda_c and that gate are computed on the device (Ops::clamp_affine) and read by the kernels
// there: no host read of lambda.
// Under dtype bf16 (save_bf16_operands) the layer keeps the kernel's bf16 copies of q~1, k~1, q~2,
// k~2 and v instead of fp32 ones, computed in the backward's scratch, and the L2 norms' backward
// reads x~ from the copies (Bf16Matmuls::l2norm_backward_saved: x~ rounded, as the scores used it).
//
// attention.tda_heads "halved" is the parameter-matched variant, built as the Differential
// Transformer matches softmax: H/2 heads, each with two q/k views of d (the threshold keeps its
// d) and a value of 2d, so c_attn is [q1 (C/2) | k1 (C/2) | q2 (C/2) | k2 (C/2) | v (C)], 3C wide
// like softmax's, and gamma has 2d entries. The math per head is unchanged.
#include <algorithm>
#include <cmath>

#include "attention/common.h"
#include "attention/registry.h"
#include "backend/mixed_precision.h"
#include "core/error.h"

namespace tda {

namespace {

using namespace attn_util;

class TdaAttention final : public AttentionVariant {
 public:
  TdaAttention(const ModelConfig& m, const AttentionConfig& a)
      : C_(m.d_model),
        H_(halved(a) ? m.n_head / 2 : m.n_head),
        D_(m.head_dim()),
        Dv_(halved(a) ? 2 * m.head_dim() : m.head_dim()),
        Cq_(H_ * D_),
        cfg_(read_threshold_options(a)),
        lambda_init_(a.option<double>("lambda_init")) {
    const auto heads = a.option<std::string>("tda_heads");
    TDA_CHECK(heads == "full" || heads == "halved",
              "config: attention.tda_heads must be \"full\" or \"halved\", got \"" + heads + "\"");
    TDA_CHECK(heads == "full" || m.n_head % 2 == 0,
              "config: attention.tda_heads \"halved\" needs an even model.n_head, got " +
                  std::to_string(m.n_head));
  }
  std::string kind() const override { return "tda"; }
  AttnMath math() const override { return AttnMath::kDiffThreshold; }
  AttentionTraits traits() const override {
    AttentionTraits t = traits_of_math(math(), cfg_.power);
    t.empty_row_qk = {{0, Cq_}, {2 * Cq_, 3 * Cq_}};  // both views: [q1 | k1 | q2 | k2 | v]
    return t;
  }
  int proj_width() const override { return 4 * Cq_ + C_; }
  // Order: lambda, [beta], gamma.
  std::vector<ParamSpec> extra_params(int) const override {
    std::vector<ParamSpec> p;
    p.push_back({"lambda", {1}, ParamSpec::Init::kConst, float(lambda_init_), false});
    if (cfg_.learn_beta)
      p.push_back({"beta", {1}, ParamSpec::Init::kConst, float(cfg_.beta), false});
    p.push_back({"gamma", {Dv_}, ParamSpec::Init::kOnes, 0.f, false});
    return p;
  }
  size_t act_floats(int B, int T) const override { return slot_floats(act_slots(B, T)); }
  size_t scratch_floats(int B, int T) const override {
    return std::max(slot_floats(grad_slots(B, T)), slot_floats(operand_slots(B, T)));
  }
  bool save_bf16_operands(const Bf16Matmuls& b) override {
    saved_by_ = &b;
    return true;
  }

  void forward(const AttnContext& c, const float* proj, float* y, float* act,
               const std::vector<float*>& extra) override {
    Act s = carve(act_slots(c.B, c.T), act);
    const int W = proj_width();
    const size_t nr = size_t(c.B) * H_ * c.T;
    if (saved_by_) {  // q, k, v for this call only: the kernel keeps their bf16 copies
      const Act o = carve(operand_slots(c.B, c.T), forward_scratch(c, kind()));
      s.q1 = o.q1, s.k1 = o.k1, s.q2 = o.q2, s.k2 = o.k2, s.v = o.v;
    }
    float* qk[4] = {s.q1, s.k1, s.q2, s.k2};
    float* nrm[4] = {s.q1n, s.k1n, s.q2n, s.k2n};
    for (int t = 0; t < 4; ++t) {
      c.ops.rope_forward(qk[t], proj, W, t * Cq_, c.cos, c.sin, c.B, c.T, H_, D_, c.pos0);
      c.ops.l2norm_forward(qk[t], nrm[t], nr, D_);
    }
    c.ops.split_heads(s.v, proj, W, 4 * Cq_, c.B, c.T, H_, Dv_);
    // tau_i = max(beta, 0) c_i, on the device from the device beta
    c.ops.threshold_tau(s.tau, beta(extra), float(cfg_.beta), false, c.T, cfg_.kappa, D_);
    // lambda_c = clamp(lambda, 0, 1) and [0 <= lambda <= 1], kept for the backward
    c.ops.clamp_affine(s.lam, extra[0], 1.f, 0.f, 0.f, 1.f);
    AttnArgs a = args(c, s);
    c.ops.attention_forward(a);
    head_norm_forward(c, y, s.rstd, s.o, extra[gi()], H_, Dv_, float(cfg_.head_norm_eps));
  }

  void backward(const AttnContext& c, const float*, const float* dy, float* dproj, float* act,
                const std::vector<float*>& extra, const std::vector<float*>& dextra,
                float* scratch) override {
    const Act s = carve(act_slots(c.B, c.T), act);
    const Grads g = carve(grad_slots(c.B, c.T), scratch);
    const size_t nr = size_t(c.B) * H_ * c.T;
    float* dqk[4] = {g.dq, g.dk, g.dq2, g.dk2};
    const int W = proj_width();
    head_norm_backward(c, g.g, dextra[gi()], dy, s.o, extra[gi()], s.rstd, H_, Dv_, g.om, g.dom);
    AttnArgs a = with_grads(args(c, s), g);
    a.dq2 = g.dq2;
    a.dk2 = g.dk2;
    a.drow_tau = g.dtau;
    a.drow_lambda = g.dlam;
    c.ops.attention_backward(a);
    // dlambda = -sum e a2, through clamp(lambda, 0, 1) with inclusive bounds: dlambda += gate sum
    c.ops.zero(g.dl_sum, 1);
    c.ops.head_row_sum(g.dl_sum, g.dlam, nullptr, 1.f, c.B * H_, 1, c.T);
    c.ops.axpby(dextra[0], 1.f, g.dl_sum, 1.f, 1, s.lam + 1);
    // dbeta = sum_i c_i dL/dtau_i (both views share tau), only while beta > 0
    if (cfg_.learn_beta) {  // weights [beta > 0] c_i: no gradient while beta <= 0
      c.ops.threshold_tau(g.cc, beta(extra), 0.f, true, c.T, cfg_.kappa, D_);
      c.ops.head_row_sum(dextra[1], g.dtau, g.cc, 1.f, c.B * H_, 1, c.T);
    }
    const float* qk[4] = {s.q1, s.k1, s.q2, s.k2};
    const float* nrm[4] = {s.q1n, s.k1n, s.q2n, s.k2n};
    const AttnOperand copy[4] = {AttnOperand::kQ, AttnOperand::kK, AttnOperand::kQ2,
                                 AttnOperand::kK2};
    for (int t = 0; t < 4; ++t) {
      if (saved_by_)  // x~ from the kernel's copy
        saved_operands_of(c, kind()).l2norm_backward_saved(dqk[t], a, copy[t], nrm[t]);
      else
        c.ops.l2norm_backward(dqk[t], qk[t], nrm[t], nr, D_);
      c.ops.rope_backward(dproj, dqk[t], W, t * Cq_, c.cos, c.sin, c.B, c.T, H_, D_, c.pos0,
                          nullptr, 0);
    }
    c.ops.merge_heads(dproj, g.dv, W, 4 * Cq_, c.B, c.T, H_, Dv_);
  }

 private:
  struct Act {
    float *q1, *k1, *q2, *k2, *v, *o, *q1n, *k1n, *q2n, *k2n, *rstd, *tau;
    float* lam;    // {lambda_c, gate}
    float* saved;  // q~1, k~1, q~2, k~2, v's bf16 copies instead (save_bf16_operands)
  };
  SlotTable<Act> act_slots(int B, int T) const {
    const size_t n = size_t(B) * T * C_, nq = size_t(B) * T * Cq_, nr = size_t(B) * H_ * T;
    if (saved_by_)
      return {{&Act::o, n},
              {&Act::q1n, nr},
              {&Act::k1n, nr},
              {&Act::q2n, nr},
              {&Act::k2n, nr},
              {&Act::rstd, nr},
              {&Act::tau, size_t(T)},
              {&Act::lam, 2},
              {&Act::saved, saved_operand_floats(*saved_by_, math(), B, H_, T, D_, Dv_)}};
    return {{&Act::q1, nq},  {&Act::k1, nq},  {&Act::q2, nq},   {&Act::k2, nq},
            {&Act::v, n},    {&Act::o, n},    {&Act::q1n, nr},  {&Act::k1n, nr},
            {&Act::q2n, nr}, {&Act::k2n, nr}, {&Act::rstd, nr}, {&Act::tau, size_t(T)},
            {&Act::lam, 2}};
  }
  // Where the forward computes q1, k1, q2, k2, v under save_bf16_operands (forward_scratch).
  SlotTable<Act> operand_slots(int B, int T) const {
    const size_t n = size_t(B) * T * C_, nq = size_t(B) * T * Cq_;
    return {{&Act::q1, nq}, {&Act::k1, nq}, {&Act::q2, nq}, {&Act::k2, nq}, {&Act::v, n}};
  }
  struct Grads {
    float *om, *dom, *g, *dv, *dq, *dk, *dq2, *dk2, *dtau, *dlam, *cc, *dl_sum;
  };
  SlotTable<Grads> grad_slots(int B, int T) const {
    const size_t n = size_t(B) * T * C_, nq = size_t(B) * T * Cq_, nr = size_t(B) * H_ * T;
    return {{&Grads::om, n},    {&Grads::dom, n},   {&Grads::g, n},          {&Grads::dv, n},
            {&Grads::dq, nq},   {&Grads::dk, nq},   {&Grads::dq2, nq},       {&Grads::dk2, nq},
            {&Grads::dtau, nr}, {&Grads::dlam, nr}, {&Grads::cc, size_t(T)}, {&Grads::dl_sum, 1}};
  }
  int gi() const { return cfg_.learn_beta ? 2 : 1; }           // index of gamma in extra
  const float* beta(const std::vector<float*>& extra) const {  // null: the fixed cfg_.beta
    return cfg_.learn_beta ? extra[1] : nullptr;
  }
  AttnArgs args(const AttnContext& c, const Act& s) const {
    AttnArgs a = make_args(math(), c, H_, D_, Dv_, 1.0f);
    a.q = s.q1;
    a.k = s.k1;
    a.q2 = s.q2;
    a.k2 = s.k2;
    a.v = s.v;
    a.out = s.o;
    a.tau = s.tau;
    a.power = cfg_.power;
    a.lambda = s.lam;  // lambda_c = clamp(lambda, 0, 1), on the device
    a.saved = reinterpret_cast<uint16_t*>(s.saved);
    return a;
  }
  int C_, H_, D_, Dv_, Cq_;  // H_ heads of q/k dim D_ and value dim Dv_; Cq_ = H_ D_ per q/k
  static bool halved(const AttentionConfig& a) {
    return a.option<std::string>("tda_heads") == "halved";
  }
  ThresholdOptions cfg_;
  double lambda_init_;
  const Bf16Matmuls* saved_by_ = nullptr;  // set: q~, k~, v saved as the kernel's bf16 copies
};

// TRA's options, and the weight of view 2 and the head layout.
std::vector<AttentionOptionSpec> tda_options() {
  std::vector<AttentionOptionSpec> o = threshold_options();
  o.push_back({"lambda_init", 0.5, "initial lambda, the weight of view 2 (clamped to [0, 1])"});
  o.push_back(
      {"tda_heads", "full", "\"full\" or \"halved\" (H/2 heads, values of 2d: softmax's size)"});
  return o;
}

}  // namespace

TDA_REGISTER_ATTENTION(
    "tda", TdaAttention, "TDA",
    "Threshold Differential Attention: two TRA views, their difference (the paper)", 10,
    tda_options());

}  // namespace tda
