// `diff_softmax`: Differential Transformer (Ye et al. 2024; attention-variants.md §7).
// Everything lives in attention/diff.h, shared with `diff_rela`, which differs only in the weight.
#include "attention/diff.h"
#include "attention/registry.h"

namespace tda {
namespace {
struct DiffSoftmaxAttention final : attn_diff::DiffAttention {
  DiffSoftmaxAttention(const ModelConfig& m, const AttentionConfig& a)
      : DiffAttention(m, a, false) {}
};
}  // namespace
TDA_REGISTER_ATTENTION(
    "diff_softmax", DiffSoftmaxAttention, "Diff Softmax",
    "Differential Transformer: the difference of two softmax maps (Ye et al. 2024)", 6,
    {attn_util::head_norm_eps_option()});
}  // namespace tda
