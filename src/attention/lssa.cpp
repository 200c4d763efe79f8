// `lssa`: length-scaled softplus attention, dense first stage only (Gao & Spratling 2025;
// attention-variants.md §5).
//   c_i = log(n_i) / log(base), n_i = i + 1;  f_ij = softplus(c_i s_ij);  a_ij = f_ij / sum_j f_ij
// base: lssa_scale_base "head_dim" (default, ASSUMED: log_d n) | "seq_len" (model.seq_len, the
// training length: scale 1 at the last training position).
// The scale is folded into the query, q'_i = c_i q_i, so the kernel runs the plain
// l1-normalised softplus policy; backward dq_i = c_i dq'_i. No parameters.
// c_attn rows: [q (C) | k (C) | v (C)]. Saved: q', k, v, o, F_i.
#include <cmath>
#include <vector>

#include "attention/common.h"
#include "attention/registry.h"
#include "core/error.h"

namespace tda {

namespace {

using namespace attn_util;

class LssaAttention final : public AttentionVariant {
 public:
  LssaAttention(const ModelConfig& m, const AttentionConfig& a)
      : C_(m.d_model), H_(m.n_head), D_(m.head_dim()) {
    const auto base = a.option<std::string>("lssa_scale_base");
    TDA_CHECK(base == "head_dim" || base == "seq_len",
              "config: attention.lssa_scale_base must be \"head_dim\" or \"seq_len\", got \"" +
                  base + "\"");
    log_base_ = std::log(float(base == "head_dim" ? D_ : m.seq_len));
  }
  std::string kind() const override { return "lssa"; }
  AttnMath math() const override { return AttnMath::kSoftplus; }
  int proj_width() const override { return 3 * C_; }
  size_t act_floats(int B, int T) const override { return slot_floats(act_slots(B, T)); }
  size_t scratch_floats(int B, int T) const override { return slot_floats(grad_slots(B, T)); }

  void forward(const AttnContext& c, const float* proj, float* y, float* act,
               const std::vector<float*>&) override {
    const Act s = carve(act_slots(c.B, c.T), act);
    const int W = proj_width();
    rope_qkv_forward(c, proj, W, H_, D_, s.q, s.k, s.v);
    // c_i = log(i+1) / log(base), on the device, kept for the backward
    c.ops.position_scales(s.c, nullptr, nullptr, log_base_, 1, c.T);
    c.ops.scale_rows(s.q, s.q, s.c, 0, c.B, H_, c.T, D_);  // q' = c_i q
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
    c.ops.scale_rows(w.dq, w.dq, s.c, 0, c.B, H_, c.T, D_);  // dq = c_i dq'
    rope_qkv_backward(c, dproj, W, H_, D_, w.dq, w.dk, w.dv);
  }

 private:
  struct Act {
    float *q, *k, *v, *o, *F, *c;  // F: the row sums of softplus; c: the T row scales c_i
  };
  SlotTable<Act> act_slots(int B, int T) const {
    const size_t n = size_t(B) * T * C_;
    return {{&Act::q, n},
            {&Act::k, n},
            {&Act::v, n},
            {&Act::o, n},
            {&Act::F, size_t(B) * H_ * T},
            {&Act::c, size_t(T)}};
  }
  SlotTable<QkvGrads> grad_slots(int B, int T) const { return qkv_grad_slots(size_t(B) * T * C_); }
  AttnArgs args(const AttnContext& c, const Act& s) const {
    AttnArgs a = make_args(math(), c, H_, D_, D_, 1.0f / std::sqrt(float(D_)));
    a.q = s.q;
    a.k = s.k;
    a.v = s.v;
    a.out = s.o;
    a.stats = s.F;
    return a;
  }
  int C_, H_, D_;
  float log_base_;
};

}  // namespace

TDA_REGISTER_ATTENTION("lssa", LssaAttention, "LSSA",
                       "length-scaled softplus attention, dense first stage (Gao & Spratling 2025)",
                       4,
                       {{"lssa_scale_base", "head_dim",
                         "log base of the length scale: \"head_dim\" or \"seq_len\""}});

}  // namespace tda
