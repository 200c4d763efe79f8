// `lssa`: length-scaled softplus attention, dense first stage only (Gao & Spratling 2025;
// attention-variants.md §5).
//   c_i = log(n_i) / log(base), n_i = i + 1;  f_ij = softplus(c_i s_ij);  a_ij = f_ij / sum_j f_ij
// base: lssa_scale_base "head_dim" (default, ASSUMED: log_d n) | "seq_len" (model.seq_len, the
// training length: scale 1 at the last training position).
// The scale is folded into the query, q'_i = c_i q_i, so the kernel runs the plain
// l1-normalised softplus policy; backward dq_i = c_i dq'_i. No parameters. The kernel applies c_i
// as it reads q (AttnArgs::q_scale: on the GPU inside its bf16 operand cast, no pass of its own),
// and RoPE's backward as it reads dq' (qkv_attention.h).
// The layer is qkv_attention.h's with that scale; saved: q, k, v, o, F_i and c_i.
#include <cmath>

#include "attention/qkv_attention.h"
#include "attention/registry.h"
#include "core/error.h"

namespace tda {

namespace {

class LssaAttention final : public QkvAttention {
 public:
  LssaAttention(const ModelConfig& m, const AttentionConfig& a)
      : QkvAttention(m, AttnMath::kSoftplus) {
    const auto base = a.option<std::string>("lssa_scale_base");
    TDA_CHECK(base == "head_dim" || base == "seq_len",
              "config: attention.lssa_scale_base must be \"head_dim\" or \"seq_len\", got \"" +
                  base + "\"");
    log_base_ = std::log(float(base == "head_dim" ? D_ : m.seq_len));
  }
  std::string kind() const override { return "lssa"; }

 private:
  // Saved: the T row scales c_i (the kernel's stats slot holds F, the row sums of softplus).
  size_t own_act_floats(int, int T) const override { return size_t(T); }
  void before_kernel(const AttnContext& c, float* cs) const override {
    // c_i = log(i+1) / log(base), on the device, kept for the backward
    c.ops.position_scales(cs, nullptr, nullptr, log_base_, 1, c.T);
  }
  void set_args(AttnArgs& a, const float* cs) const override {
    a.q_scale = cs;  // q' = c_i q, every head alike
    a.q_scale_h_stride = 0;
  }
  float log_base_;
};

}  // namespace

TDA_REGISTER_ATTENTION("lssa", LssaAttention, "LSSA",
                       "length-scaled softplus attention, dense first stage (Gao & Spratling 2025)",
                       4,
                       {{"lssa_scale_base", "head_dim",
                         "log base of the length scale: \"head_dim\" or \"seq_len\""}});

}  // namespace tda
