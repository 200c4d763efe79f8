// `softmax`: causal scaled dot-product attention (Vaswani et al. 2017) with RoPE on q and k.
// c_attn rows: [q (C) | k (C) | v (C)], head h at columns h*D within each.
// Saved per layer: rotated q, k and v in (B,H,T,D), the output o and the row LSE.
#include <cmath>

#include "attention/common.h"
#include "attention/registry.h"

namespace tda {

namespace {

using namespace attn_util;

class SoftmaxAttention final : public AttentionVariant {
 public:
  SoftmaxAttention(const ModelConfig& m, const AttentionConfig&)
      : C_(m.d_model), H_(m.n_head), D_(m.head_dim()) {}
  std::string kind() const override { return "softmax"; }
  AttnMath math() const override { return AttnMath::kSoftmax; }
  int proj_width() const override { return 3 * C_; }
  size_t act_floats(int B, int T) const override { return slot_floats(act_slots(B, T)); }
  size_t scratch_floats(int B, int T) const override { return slot_floats(grad_slots(B, T)); }

  void forward(const AttnContext& c, const float* proj, float* y, float* act,
               const std::vector<float*>&) override {
    const Act s = carve(act_slots(c.B, c.T), act);
    const int W = proj_width();
    rope_qkv_forward(c, proj, W, H_, D_, s.q, s.k, s.v);
    AttnArgs a = args(c, s);
    c.ops.attention_forward(a);
    c.ops.merge_heads(y, s.o, C_, 0, c.B, c.T, H_, D_);
  }

  void backward(const AttnContext& c, const float*, const float* dy, float* dproj, float* act,
                const std::vector<float*>&, const std::vector<float*>&, float* scratch) override {
    const Act s = carve(act_slots(c.B, c.T), act);
    const QkvGrads w = carve(grad_slots(c.B, c.T), scratch);
    const int W = proj_width();
    c.ops.split_heads(w.g, dy, C_, 0, c.B, c.T, H_, D_);
    c.ops.attention_backward(with_grads(args(c, s), w));
    rope_qkv_backward(c, dproj, W, H_, D_, w.dq, w.dk, w.dv);
  }

 private:
  using Act = QkvAct;  // stats: the row LSE
  SlotTable<Act> act_slots(int B, int T) const {
    return qkv_act_slots(size_t(B) * T * C_, size_t(B) * H_ * T);
  }
  SlotTable<QkvGrads> grad_slots(int B, int T) const { return qkv_grad_slots(size_t(B) * T * C_); }
  AttnArgs args(const AttnContext& c, const Act& s) const {
    AttnArgs a = make_args(math(), c, H_, D_, D_, 1.0f / std::sqrt(float(D_)));
    a.q = s.q;
    a.k = s.k;
    a.v = s.v;
    a.out = s.o;
    a.stats = s.stats;
    return a;
  }
  int C_, H_, D_;
};

}  // namespace

TDA_REGISTER_ATTENTION("softmax", SoftmaxAttention, "Softmax",
                       "causal scaled dot-product attention with RoPE (Vaswani et al. 2017)", 0);

}  // namespace tda
