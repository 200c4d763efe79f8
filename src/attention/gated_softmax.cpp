// `gated_softmax`: softmax attention with a sigmoid gate on each head's output (G1; Qiu et al.
// 2025; attention-variants.md §2).
//   o_i = softmax attention output;  z_i = x_i W_theta (fused into c_attn);  y_i = o_i *
//   sigmoid(z_i) gate_shape "elementwise" (default, ASSUMED): one gate per channel, z has C
//   columns; "headwise": one gate per head, z has H columns broadcast over the head's d channels.
// c_attn rows: [q (C) | k (C) | v (C) | z (C or H)]; W_theta lives in c_attn (init like W_Q,
// no bias: ASSUMED). No extra tensors. The softmax layer is qkv_attention.h's; the gate takes the
// place of its merge of the heads (one pass: y = merge(o) gam) and of its split in the backward.
// Backward (gam = sigmoid(z)): g = dy * gam into the softmax backward (head layout);
//   dz = dy * o * gam (1 - gam)   (headwise: summed over the head's channels)
#include "attention/qkv_attention.h"
#include "attention/registry.h"
#include "core/error.h"

namespace tda {

namespace {

class GatedSoftmaxAttention final : public QkvAttention {
 public:
  GatedSoftmaxAttention(const ModelConfig& m, const AttentionConfig& a)
      : QkvAttention(m, AttnMath::kSoftmax) {
    const auto shape = a.option<std::string>("gate_shape");
    TDA_CHECK(shape == "elementwise" || shape == "headwise",
              "config: attention.gate_shape must be \"elementwise\" or \"headwise\", got \"" +
                  shape + "\"");
    headwise_ = shape == "headwise";
  }
  std::string kind() const override { return "gated_softmax"; }
  int proj_width() const override { return 3 * C_ + (headwise_ ? H_ : C_); }

  void forward(const AttnContext& c, const float* proj, float* y, float* act,
               const std::vector<float*>&) override {
    const float* o = forward_heads(c, proj, act);
    c.ops.sigmoid_gate_forward(y, o, proj + 3 * C_, proj_width(), c.B, c.T, H_, D_, group());
  }

  bool backward_reads_proj() const override { return true; }  // the gate's pre-activation z
  void backward(const AttnContext& c, const float* proj, const float* dy, float* dproj, float* act,
                const std::vector<float*>&, const std::vector<float*>&, float* scratch) override {
    const int W = proj_width();
    // dz = dy o gam (1 - gam) into dproj's gate columns; softmax's dO = dy gam, in head layout
    c.ops.sigmoid_gate_backward(head_grad(c, scratch), dproj + 3 * C_, W, dy,
                                saved_o(c.B, c.T, act), proj + 3 * C_, W, c.B, c.T, H_, D_,
                                group());
    backward_heads(c, dproj, act, scratch);
  }

 private:
  int group() const { return headwise_ ? D_ : 1; }  // channels per gate
  bool headwise_;
};

}  // namespace

TDA_REGISTER_ATTENTION("gated_softmax", GatedSoftmaxAttention, "Gated Softmax",
                       "softmax with a sigmoid gate on each head's output (G1; Qiu et al. 2025)", 1,
                       {{"gate_shape", "elementwise",
                         "\"elementwise\" (one gate per channel) or \"headwise\" (one per head)"}});

}  // namespace tda
