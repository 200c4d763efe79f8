// `ssmax`: Scalable-Softmax (Nakanishi 2025; attention-variants.md §3).
//   z_ij = f_hi s_ij,  f_hi = s_h log(n_i) (+ b_h with ssmax_bias),  n_i = i + 1;  a = softmax_j(z)
// Implemented by scaling the rotated query, q'_i = f_hi q_i, and running the softmax kernel; the
// kernel applies f as it reads q (AttnArgs::q_scale: on the GPU inside its bf16 operand cast, so
// q' is never stored). Backward from the kernel's dq': dq_i = f_hi dq'_i (applied by RoPE's
// backward as it reads dq');
//   ds_h = sum_{b,i} log(n_i) <q_i, dq'_i>;  db_h = sum_{b,i} <q_i, dq'_i>.
// Parameters: s (H; init ssmax_s_init = 0.43, ASSUMED), b (H; init 0, only with ssmax_bias).
// c_attn rows: [q (C) | k (C) | v (C)].
// Under dtype bf16 (save_bf16_operands) the layer keeps the kernel's bf16 copies of q', k, v in
// place of fp32 q, k, v, and q itself in bf16 for the scalar gradients' dots (Bf16Matmuls::
// row_dot_bf16): the copy holds q' = f q, and q cannot be recovered from it where f_hi = 0 (i = 0
// without a bias). q rounded to bf16 (2^-9 relative) is the one change of results there.
#include <cmath>

#include "attention/common.h"
#include "attention/registry.h"
#include "backend/mixed_precision.h"

namespace tda {

namespace {

using namespace attn_util;

class SsmaxAttention final : public AttentionVariant {
 public:
  SsmaxAttention(const ModelConfig& m, const AttentionConfig& a)
      : C_(m.d_model),
        H_(m.n_head),
        D_(m.head_dim()),
        cfg_{a.option<double>("ssmax_s_init"), a.option<bool>("ssmax_bias")} {}
  std::string kind() const override { return "ssmax"; }
  AttnMath math() const override { return AttnMath::kSoftmax; }
  int proj_width() const override { return 3 * C_; }
  std::vector<ParamSpec> extra_params(int) const override {
    std::vector<ParamSpec> p{
        {"ssmax_s", {H_}, ParamSpec::Init::kConst, float(cfg_.ssmax_s_init), false}};
    if (cfg_.ssmax_bias) p.push_back({"ssmax_b", {H_}, ParamSpec::Init::kZeros, 0.f, false});
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
    const size_t n = size_t(c.B) * c.T * C_;
    if (saved_by_) qkv_in_scratch(c, kind(), n, &s.q, &s.k, &s.v);
    rope_qkv_forward(c, proj, W, H_, D_, s.q, s.k, s.v);
    // f_hi = s_h log(i+1) + b_h from the H device scalars, and log(i+1) for ds_h (n_i = i + 1,
    // log 1 = 0 at i = 0), on the device, kept for the backward; the kernel reads q' = f q
    c.ops.position_scales(s.f, extra[0], cfg_.ssmax_bias ? extra[1] : nullptr, 1.f, H_, c.T);
    c.ops.position_scales(s.logn, nullptr, nullptr, 1.f, 1, c.T);
    AttnArgs a = args(c, s);
    c.ops.attention_forward(a);
    if (saved_by_) saved_operands_of(c, kind()).store_bf16(q16(c, s), s.q, n);  // q, not q'
    c.ops.merge_heads(y, s.o, C_, 0, c.B, c.T, H_, D_);
  }

  void backward(const AttnContext& c, const float*, const float* dy, float* dproj, float* act,
                const std::vector<float*>&, const std::vector<float*>& dextra,
                float* scratch) override {
    const Act s = carve(act_slots(c.B, c.T), act);
    const Grads w = carve(grad_slots(c.B, c.T), scratch);
    const int W = proj_width();
    c.ops.split_heads(w.g, dy, C_, 0, c.B, c.T, H_, D_);
    c.ops.attention_backward(with_grads(args(c, s), w));
    // Scalar gradients from the per-row dots <q_i, dq'_i>, reduced per head in a fixed order.
    const size_t nr = size_t(c.B) * H_ * c.T;
    if (saved_by_)
      saved_operands_of(c, kind()).row_dot_bf16(w.qd, q16(c, s), w.dq, nr, D_);
    else
      c.ops.row_dot(w.qd, s.q, w.dq, nr, D_);
    c.ops.head_row_sum(dextra[0], w.qd, s.logn, 1.f, c.B, H_, c.T);  // weights log n
    if (cfg_.ssmax_bias) c.ops.head_row_sum(dextra[1], w.qd, nullptr, 1.f, c.B, H_, c.T);
    rope_qkv_backward(c, dproj, W, H_, D_, w.dq, w.dk, w.dv, s.f, c.T);  // dq = f dq', fused
  }

 private:
  struct Act {
    float *q, *k, *v, *o, *lse, *f, *logn;  // f: (H, T) factors f_hi; logn: log(i+1) (T)
    float* saved;  // q', k, v's bf16 copies (save_bf16_operands), then q in bf16 (q16())
  };
  SlotTable<Act> act_slots(int B, int T) const {
    const size_t n = size_t(B) * T * C_, nr = size_t(B) * H_ * T;
    if (saved_by_)
      return {{&Act::o, n},
              {&Act::lse, nr},
              {&Act::f, size_t(H_) * T},
              {&Act::logn, size_t(T)},
              {&Act::saved, copies(B, T) + (n + 1) / 2}};
    return {
        {&Act::q, n},
        {&Act::k, n},
        {&Act::v, n},
        {&Act::o, n},
        {&Act::lse, nr},
        {&Act::f, size_t(H_) * T},
        {&Act::logn, size_t(T)},
    };
  }
  struct Grads {
    float *g, *dq, *dk, *dv, *qd;  // qd: the per-row dots <q_i, dq'_i>
  };
  SlotTable<Grads> grad_slots(int B, int T) const {
    const size_t n = size_t(B) * T * C_;
    return {{&Grads::g, n},
            {&Grads::dq, n},
            {&Grads::dk, n},
            {&Grads::dv, n},
            {&Grads::qd, size_t(B) * H_ * T}};
  }
  AttnArgs args(const AttnContext& c, const Act& s) const {
    AttnArgs a = make_args(math(), c, H_, D_, D_, 1.0f / std::sqrt(float(D_)));
    a.q = s.q;
    a.q_scale = s.f;  // q' = f q, per head
    a.q_scale_h_stride = c.T;
    a.k = s.k;
    a.v = s.v;
    a.out = s.o;
    a.stats = s.lse;
    a.saved = reinterpret_cast<uint16_t*>(s.saved);
    return a;
  }
  size_t copies(int B, int T) const {  // floats of the kernel's copies in Act::saved
    return saved_operand_floats(*saved_by_, math(), B, H_, T, D_, D_);
  }
  uint16_t* q16(const AttnContext& c, const Act& s) const {  // q (B, H, T, D) in bf16
    return reinterpret_cast<uint16_t*>(s.saved + copies(c.B, c.T));
  }
  int C_, H_, D_;
  struct {
    double ssmax_s_init;
    bool ssmax_bias;
  } cfg_;
  const Bf16Matmuls* saved_by_ = nullptr;  // set: q', k, v saved as the kernel's bf16 copies
};

}  // namespace

TDA_REGISTER_ATTENTION("ssmax", SsmaxAttention, "SSMax",
                       "Scalable-Softmax: scores scaled by s log n (Nakanishi 2025)", 2,
                       {{"ssmax_s_init", 0.43, "initial value of the learnable per-head scale s"},
                        {"ssmax_bias", false, "add a learnable per-head bias b to s log n"}});

}  // namespace tda
