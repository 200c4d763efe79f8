// `entmax`: alpha-entmax attention (Peters, Niculae, Martins 2019; attention-variants.md §4),
// alpha = attention.entmax_alpha in (1, 2], 1.5 by default (the paper's baseline).
//   z_ij = q_i.k_j / sqrt(d) (j <= i);  p_ij = max((alpha-1) z_ij - tau_i, 0)^(1/(alpha-1)),
//   tau_i with sum_j p_ij = 1 (1.5: max(z_ij/2 - tau_i, 0)^2);  o_i = sum_j p_ij v_j.
//   Exact zeros wherever (alpha-1) z_ij <= tau_i.
// Options: entmax_solver "sort" (exact, default; alpha 1.5 only) | "bisect" (entmax_iters steps,
// default 30, ASSUMED; >= 24 reach fp32 precision), then renormalised as the entmax package does
// (its entmax_bisect).
// The layer is qkv_attention.h's; no parameters; saved per row: (tau_i, norm_i).
#include "attention/qkv_attention.h"
#include "attention/registry.h"
#include "core/error.h"

namespace tda {

namespace {

class EntmaxAttention final : public QkvAttention {
 public:
  EntmaxAttention(const ModelConfig& m, const AttentionConfig& a)
      : QkvAttention(m, AttnMath::kEntmax),
        solver_(a.option<std::string>("entmax_solver")),
        iters_(a.option<int>("entmax_iters")),
        alpha_(a.option<double>("entmax_alpha")) {
    TDA_CHECK(
        solver_ == "sort" || solver_ == "bisect",
        "config: attention.entmax_solver must be \"sort\" or \"bisect\", got \"" + solver_ + "\"");
    TDA_CHECK(iters_ > 0, "config: attention.entmax_iters must be > 0");
  }
  std::string kind() const override { return "entmax"; }

 private:
  void set_args(AttnArgs& a, const float*) const override {
    a.entmax_alpha = float(alpha_);
    a.entmax_bisect = solver_ == "bisect";
    a.entmax_iters = iters_;
  }
  std::string solver_;
  int iters_;
  double alpha_;
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
