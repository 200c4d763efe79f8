#include "attention/registry.h"

#include "core/error.h"

namespace tda {

std::map<std::string, AttentionFactory>& attention_registry() {
  static std::map<std::string, AttentionFactory> r;
  return r;
}

std::vector<std::string> attention_kinds() {
  std::vector<std::string> k;
  for (const auto& kv : attention_registry()) k.push_back(kv.first);
  return k;
}

std::unique_ptr<AttentionVariant> make_attention(const ModelConfig& m, const AttentionConfig& a) {
  auto it = attention_registry().find(a.kind);
  if (it == attention_registry().end()) {
    std::string known;
    for (const auto& k : attention_kinds()) known += (known.empty() ? "" : ", ") + k;
    throw Error("config: attention.kind '" + a.kind + "' is not one of: " + known);
  }
  return it->second(m, a);
}

}  // namespace tda
