// `diff_rela`: differential ReLA (attention-variants.md §9; ASSUMED construction: the Diff
// Transformer of §7 with each softmax replaced by max(s, 0), same layout, lambda and norm).
// Rows where both views are empty give o^ = 0, hence y = 0 and no gradient into q, k, v.
#include "attention/diff.h"
#include "attention/registry.h"

namespace tda {
namespace {
struct DiffRelaAttention final : attn_diff::DiffAttention {
  DiffRelaAttention(const ModelConfig& m, const AttentionConfig& a) : DiffAttention(m, a, true) {}
};
}  // namespace
TDA_REGISTER_ATTENTION("diff_rela", DiffRelaAttention, "Diff ReLA",
                       "differential ReLA: the difference of two rectified maps", 8,
                       {attn_util::head_norm_eps_option()});
}  // namespace tda
