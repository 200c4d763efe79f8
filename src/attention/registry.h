// attention.kind -> variant. Each variant file registers itself with TDA_REGISTER_ATTENTION,
// so adding a mechanism is adding one file.
#pragma once
#include <functional>
#include <map>

#include "attention/variant.h"

namespace tda {

using AttentionFactory =
    std::function<std::unique_ptr<AttentionVariant>(const ModelConfig&, const AttentionConfig&)>;

std::map<std::string, AttentionFactory>& attention_registry();

struct RegisterAttention {
  RegisterAttention(const std::string& kind, AttentionFactory f) {
    attention_registry()[kind] = std::move(f);
  }
};

#define TDA_REGISTER_ATTENTION(kind, Class)                                             \
  static ::tda::RegisterAttention tda_register_##Class(                                \
      kind, [](const ::tda::ModelConfig& m, const ::tda::AttentionConfig& a) {         \
        return std::unique_ptr<::tda::AttentionVariant>(new Class(m, a));              \
      })

}  // namespace tda
