// The layer shape of the kinds that are one attention kernel over RoPE'd heads and nothing else:
//   c_attn rows [q (C) | k (C) | v (C)], head h at columns h*D within each;
//   forward:  q, k, v = rope(split(proj));  o = attention(q, k, v);  y = merge(o)
//   backward: the same in reverse, dq, dk, dv through the kernel's backward.
// Saved per layer: rotated q, k, v and o in (B, H, T, D), and the kernel's per-row statistics.
// A kind states its math and, through set_args(), the kernel options it adds (softmax, entmax);
// one that scales q by position computes its row scales into the floats it saves and hands them
// to the kernel (AttnArgs::q_scale, applied as q is read; dq = q_scale d/dq', applied as RoPE's
// backward reads it: lssa); one that gates the output replaces the merge of the heads
// (forward_heads, backward_heads: gated_softmax's gate merges and splits them as it goes).
// Under dtype bf16 (save_bf16_operands) the layer saves the kernel's bf16 copies of q, k, v in
// place of the fp32 ones, which the forward computes in the backward's scratch: the backward
// reads q, k, v only through the kernel, which takes the copies as they are (no second cast).
#pragma once
#include <cmath>

#include "attention/common.h"

namespace tda {

class QkvAttention : public AttentionVariant {
 public:
  QkvAttention(const ModelConfig& m, AttnMath math)
      : C_(m.d_model), H_(m.n_head), D_(m.head_dim()), math_(math) {}
  AttnMath math() const final { return math_; }
  int proj_width() const override { return 3 * C_; }
  size_t act_floats(int B, int T) const final {
    return slot_floats(act_slots(B, T)) + own_act_floats(B, T);
  }
  size_t scratch_floats(int B, int T) const override { return slot_floats(grad_slots(B, T)); }
  bool save_bf16_operands(const Bf16Matmuls& b) final {
    saved_by_ = &b;
    return true;
  }

  void forward(const AttnContext& c, const float* proj, float* y, float* act,
               const std::vector<float*>&) override {
    c.ops.merge_heads(y, forward_heads(c, proj, act), C_, 0, c.B, c.T, H_, D_);
  }

  void backward(const AttnContext& c, const float*, const float* dy, float* dproj, float* act,
                const std::vector<float*>&, const std::vector<float*>&, float* scratch) override {
    c.ops.split_heads(head_grad(c, scratch), dy, C_, 0, c.B, c.T, H_, D_);
    backward_heads(c, dproj, act, scratch);
  }

 protected:
  // The layer up to the attention output o (B, H, T, D), saved in act, before its heads merge.
  const float* forward_heads(const AttnContext& c, const float* proj, float* act) const {
    attn_util::QkvAct s = carve(act_slots(c.B, c.T), act);
    if (saved_by_)  // q, k, v for this call only: the kernel keeps their bf16 copies
      attn_util::qkv_in_scratch(c, kind(), size_t(c.B) * c.T * C_, &s.q, &s.k, &s.v);
    attn_util::rope_qkv_forward(c, proj, proj_width(), H_, D_, s.q, s.k, s.v);
    before_kernel(c, own_act(c, act));
    c.ops.attention_forward(args(c, s, own_act(c, act)));
    return s.o;
  }
  // Where the backward takes the gradient of o, in head layout (B, H, T, D), in `scratch`.
  float* head_grad(const AttnContext& c, float* scratch) const {
    return carve(grad_slots(c.B, c.T), scratch).g;
  }
  // The backward from head_grad() on: the kernel's backward, then RoPE's into dproj.
  void backward_heads(const AttnContext& c, float* dproj, float* act, float* scratch) const {
    const attn_util::QkvAct s = carve(act_slots(c.B, c.T), act);
    const attn_util::QkvGrads w = carve(grad_slots(c.B, c.T), scratch);
    const AttnArgs a = attn_util::with_grads(args(c, s, own_act(c, act)), w);
    c.ops.attention_backward(a);
    // the kernel's dq is d/dq' with q' = q_scale q (when set): RoPE's transpose scales it back
    attn_util::rope_qkv_backward(c, dproj, proj_width(), H_, D_, w.dq, w.dk, w.dv, a.q_scale,
                                 a.q_scale_h_stride);
  }
  // The kernel options of this kind beyond q, k, v, o, stats and the 1/sqrt(D) scale; `own` is
  // the kind's saved floats (below).
  virtual void set_args(AttnArgs&, const float* /*own*/) const {}
  // A kind's own step before the kernel (filling its saved floats: own_act_floats of them, after
  // the shared slots).
  virtual size_t own_act_floats(int, int) const { return 0; }
  virtual void before_kernel(const AttnContext&, float* /*own*/) const {}
  // The shared saved output o (B, H, T, D) in act, for a kind that replaces the merge.
  const float* saved_o(int B, int T, float* act) const { return carve(act_slots(B, T), act).o; }
  int C_, H_, D_;

 private:
  float* own_act(const AttnContext& c, float* act) const {
    return act + slot_floats(act_slots(c.B, c.T));
  }
  SlotTable<attn_util::QkvAct> act_slots(int B, int T) const {
    const size_t n = size_t(B) * T * C_, n_stats = size_t(attn_n_stats(math_)) * size_t(B) * H_ * T;
    if (!saved_by_) return attn_util::qkv_act_slots(n, n_stats);
    const size_t copies = attn_util::saved_operand_floats(*saved_by_, math_, B, H_, T, D_, D_);
    return {{&attn_util::QkvAct::o, n},
            {&attn_util::QkvAct::stats, n_stats},
            {&attn_util::QkvAct::saved, copies}};
  }
  SlotTable<attn_util::QkvGrads> grad_slots(int B, int T) const {
    return attn_util::qkv_grad_slots(size_t(B) * T * C_);
  }
  AttnArgs args(const AttnContext& c, const attn_util::QkvAct& s, const float* own) const {
    AttnArgs a = attn_util::make_args(math_, c, H_, D_, D_, 1.0f / std::sqrt(float(D_)));
    a.q = s.q;
    a.k = s.k;
    a.v = s.v;
    a.out = s.o;
    a.stats = s.stats;
    a.saved = reinterpret_cast<uint16_t*>(s.saved);
    set_args(a, own);
    return a;
  }
  AttnMath math_;
  const Bf16Matmuls* saved_by_ = nullptr;  // set: q, k, v saved as the kernel's bf16 copies
};

}  // namespace tda
