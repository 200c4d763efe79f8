// `softmax`: causal scaled dot-product attention (Vaswani et al. 2017) with RoPE on q and k.
// The layer is qkv_attention.h's; saved per row: the LSE.
#include "attention/qkv_attention.h"
#include "attention/registry.h"

namespace tda {

namespace {

class SoftmaxAttention final : public QkvAttention {
 public:
  SoftmaxAttention(const ModelConfig& m, const AttentionConfig&)
      : QkvAttention(m, AttnMath::kSoftmax) {}
  std::string kind() const override { return "softmax"; }
};

}  // namespace

TDA_REGISTER_ATTENTION("softmax", SoftmaxAttention, "Softmax",
                       "causal scaled dot-product attention with RoPE (Vaswani et al. 2017)", 0);

}  // namespace tda
