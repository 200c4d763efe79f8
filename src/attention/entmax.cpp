// `entmax`: alpha-entmax attention (Peters, Niculae, Martins 2019; attention-variants.md §4),
// alpha = attention.entmax_alpha in (1, 2], 1.5 by default (the paper's baseline).
//   z_ij = q_i.k_j / sqrt(d) (j <= i);  p_ij = max((alpha-1) z_ij - tau_i, 0)^(1/(alpha-1)),
//   tau_i with sum_j p_ij = 1 (1.5: max(z_ij/2 - tau_i, 0)^2);  o_i = sum_j p_ij v_j.
//   Exact zeros wherever (alpha-1) z_ij <= tau_i.
// Options: entmax_solver "sort" (exact, default; alpha 1.5 only) | "bisect" (entmax_iters steps,
// default 30, ASSUMED; >= 24 reach fp32 precision), then renormalised as the entmax package does
// (its entmax_bisect).
// c_attn rows: [q (C) | k (C) | v (C)]. No parameters. Saved: q, k, v, o, (tau_i, norm_i).
#include <cmath>

#include "attention/common.h"
#include "attention/registry.h"
#include "core/error.h"

namespace tda {

namespace {

using namespace attn_util;

class EntmaxAttention final : public AttentionVariant {
 public:
  EntmaxAttention(const ModelConfig& m, const AttentionConfig& a)
      : C_(m.d_model),
        H_(m.n_head),
        D_(m.head_dim()),
        cfg_{a.option<std::string>("entmax_solver"), a.option<int>("entmax_iters"),
             a.option<double>("entmax_alpha")} {
    TDA_CHECK(cfg_.entmax_solver == "sort" || cfg_.entmax_solver == "bisect",
              "config: attention.entmax_solver must be \"sort\" or \"bisect\", got \"" +
                  cfg_.entmax_solver + "\"");
    TDA_CHECK(cfg_.entmax_iters > 0, "config: attention.entmax_iters must be > 0");
  }
  std::string kind() const override { return "entmax"; }
  AttnMath math() const override { return AttnMath::kEntmax; }
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
  using Act = QkvAct;  // stats: (tau, norm) per row
  SlotTable<Act> act_slots(int B, int T) const {
    return qkv_act_slots(size_t(B) * T * C_, 2 * size_t(B) * H_ * T);
  }
  SlotTable<QkvGrads> grad_slots(int B, int T) const { return qkv_grad_slots(size_t(B) * T * C_); }
  AttnArgs args(const AttnContext& c, const Act& s) const {
    AttnArgs a = make_args(math(), c, H_, D_, D_, 1.0f / std::sqrt(float(D_)));
    a.q = s.q;
    a.k = s.k;
    a.v = s.v;
    a.out = s.o;
    a.stats = s.stats;
    a.entmax_alpha = float(cfg_.entmax_alpha);
    a.entmax_bisect = cfg_.entmax_solver == "bisect";
    a.entmax_iters = cfg_.entmax_iters;
    return a;
  }
  int C_, H_, D_;
  struct {
    std::string entmax_solver;
    int entmax_iters;
    double entmax_alpha;
  } cfg_;
};

// The sort solver is the closed form of 1.5-entmax; any other alpha is solved by bisection
// (docs/attention.md). Checked when the config is read.
std::string alpha_needs_bisect(const AttentionConfig& a) {
  const double alpha = a.option<double>("entmax_alpha");
  if (alpha == 1.5 || a.option<std::string>("entmax_solver") == "bisect") return "";
  return "config key 'attention.entmax_alpha' is " + fmt_num(alpha) +
         ", which needs attention.entmax_solver \"bisect\" (the exact \"sort\" solver is "
         "1.5-entmax's closed form)";
}
const bool kAlphaChecked = (declare_attention_check("entmax", alpha_needs_bisect), true);

}  // namespace

TDA_REGISTER_ATTENTION(
    "entmax", EntmaxAttention, "Entmax",
    "alpha-entmax, sparse normalised attention (Peters, Niculae, Martins 2019)", 3,
    {{"entmax_solver", "sort", "\"sort\" (exact, alpha 1.5) or \"bisect\" (any alpha)"},
     {"entmax_iters", 30, "bisection steps of the \"bisect\" solver", 0, attn_util::kInf, false},
     // 1 is softmax (no sparsity, not an entmax kernel), 2 is sparsemax
     {"entmax_alpha", 1.5, "alpha in (1, 2]; other than 1.5 needs \"bisect\"", 1, 2, false, true}});

}  // namespace tda
