// `gated_softmax`: softmax attention with a sigmoid gate on each head's output (G1; Qiu et al.
// 2025; attention-variants.md §2).
//   o_i = softmax attention output;  z_i = x_i W_theta (fused into c_attn);  y_i = o_i *
//   sigmoid(z_i) gate_shape "elementwise" (default, ASSUMED): one gate per channel, z has C
//   columns; "headwise": one gate per head, z has H columns broadcast over the head's d channels.
// c_attn rows: [q (C) | k (C) | v (C) | z (C or H)]; W_theta lives in c_attn (init like W_Q,
// no bias: ASSUMED). No extra tensors. The softmax layer is qkv_attention.h's, the gate wraps it.
// Backward (gam = sigmoid(z)): g = dy * gam into the softmax backward;
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
  // The gate's scratch, then softmax's.
  size_t scratch_floats(int B, int T) const override {
    return slot_floats(gate_slots(B, T)) + QkvAttention::scratch_floats(B, T);
  }

  void forward(const AttnContext& c, const float* proj, float* y, float* act,
               const std::vector<float*>& extra) override {
    QkvAttention::forward(c, proj, y, act, extra);
    c.ops.sigmoid_gate_forward(y, proj + 3 * C_, proj_width(), c.B * c.T, C_, group());
  }

  bool backward_reads_proj() const override { return true; }  // the gate's pre-activation z
  void backward(const AttnContext& c, const float* proj, const float* dy, float* dproj, float* act,
                const std::vector<float*>& extra, const std::vector<float*>& dextra,
                float* scratch) override {
    const GateScratch w = carve(gate_slots(c.B, c.T), scratch);
    const int W = proj_width();
    c.ops.merge_heads(w.om, saved_o(c.B, c.T, act), C_, 0, c.B, c.T, H_, D_);
    // dz = dy o gam (1 - gam) into dproj's gate columns; om becomes dy gam, softmax's dy
    c.ops.sigmoid_gate_backward(w.om, dproj + 3 * C_, W, dy, w.om, proj + 3 * C_, W, c.B * c.T, C_,
                                group());
    QkvAttention::backward(c, proj, w.om, dproj, act, extra, dextra,
                           scratch + slot_floats(gate_slots(c.B, c.T)));
  }

 private:
  struct GateScratch {
    float* om;  // the ungated output, merged (B*T, C)
  };
  SlotTable<GateScratch> gate_slots(int B, int T) const {
    return {{&GateScratch::om, size_t(B) * T * C_}};
  }
  int group() const { return headwise_ ? D_ : 1; }  // channels per gate
  bool headwise_;
};

}  // namespace

TDA_REGISTER_ATTENTION("gated_softmax", GatedSoftmaxAttention, "Gated Softmax",
                       "softmax with a sigmoid gate on each head's output (G1; Qiu et al. 2025)", 1,
                       {{"gate_shape", "elementwise",
                         "\"elementwise\" (one gate per channel) or \"headwise\" (one per head)"}});

}  // namespace tda
