// `gated_softmax`: softmax attention with a sigmoid gate on each head's output (G1; Qiu et al.
// 2025; attention-variants.md §2).
//   o_i = softmax attention output;  z_i = x_i W_theta (fused into c_attn);  y_i = o_i *
//   sigmoid(z_i) gate_shape "elementwise" (default, ASSUMED): one gate per channel, z has C
//   columns; "headwise": one gate per head, z has H columns broadcast over the head's d channels.
// c_attn rows: [q (C) | k (C) | v (C) | z (C or H)]; W_theta lives in c_attn (init like W_Q,
// no bias: ASSUMED). No extra tensors.
// Backward (gam = sigmoid(z)): g = dy * gam into the softmax backward;
//   dz = dy * o * gam (1 - gam)   (headwise: summed over the head's channels)
#include <cmath>

#include "attention/common.h"
#include "attention/registry.h"
#include "core/error.h"

namespace tda {

namespace {

using namespace attn_util;

class GatedSoftmaxAttention final : public AttentionVariant {
 public:
  GatedSoftmaxAttention(const ModelConfig& m, const AttentionConfig& a)
      : C_(m.d_model), H_(m.n_head), D_(m.head_dim()) {
    const auto shape = a.option<std::string>("gate_shape");
    TDA_CHECK(shape == "elementwise" || shape == "headwise",
              "config: attention.gate_shape must be \"elementwise\" or \"headwise\", got \"" +
                  shape + "\"");
    headwise_ = shape == "headwise";
  }
  std::string kind() const override { return "gated_softmax"; }
  AttnMath math() const override { return AttnMath::kSoftmax; }
  int proj_width() const override { return 3 * C_ + (headwise_ ? H_ : C_); }
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
    c.ops.sigmoid_gate_forward(y, proj + 3 * C_, W, c.B * c.T, C_, group());
  }

  void backward(const AttnContext& c, const float* proj, const float* dy, float* dproj, float* act,
                const std::vector<float*>&, const std::vector<float*>&, float* scratch) override {
    const Act s = carve(act_slots(c.B, c.T), act);
    const Grads w = carve(grad_slots(c.B, c.T), scratch);
    const int W = proj_width();
    c.ops.merge_heads(w.om, s.o, C_, 0, c.B, c.T, H_, D_);
    // dz = dy o gam (1 - gam) into dproj's gate columns; om becomes dy gam (merged layout)
    c.ops.sigmoid_gate_backward(w.om, dproj + 3 * C_, W, dy, w.om, proj + 3 * C_, W, c.B * c.T, C_,
                                group());
    c.ops.split_heads(w.g, w.om, C_, 0, c.B, c.T, H_, D_);
    c.ops.attention_backward(with_grads(args(c, s), w));
    rope_qkv_backward(c, dproj, W, H_, D_, w.dq, w.dk, w.dv);
  }

 private:
  using Act = QkvAct;  // stats: the row LSE
  SlotTable<Act> act_slots(int B, int T) const {
    return qkv_act_slots(size_t(B) * T * C_, size_t(B) * H_ * T);
  }
  struct Grads {
    float *om, *g, *dq, *dk, *dv;  // om: the ungated output, merged (B*T, C)
  };
  SlotTable<Grads> grad_slots(int B, int T) const {
    const size_t n = size_t(B) * T * C_;
    return {{&Grads::om, n}, {&Grads::g, n}, {&Grads::dq, n}, {&Grads::dk, n}, {&Grads::dv, n}};
  }
  int group() const { return headwise_ ? D_ : 1; }  // channels per gate
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
  bool headwise_;
};

}  // namespace

TDA_REGISTER_ATTENTION("gated_softmax", GatedSoftmaxAttention, "Gated Softmax",
                       "softmax with a sigmoid gate on each head's output (G1; Qiu et al. 2025)", 1,
                       {{"gate_shape", "elementwise",
                         "\"elementwise\" (one gate per channel) or \"headwise\" (one per head)"}});

}  // namespace tda
