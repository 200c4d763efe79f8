// attention.kind -> variant. Each variant file registers itself with TDA_REGISTER_ATTENTION,
// together with what the tools say of it (label, one-line summary, its row in the paper's
// tables), so adding a mechanism is adding one file; `tda kinds [--json]` prints the registry,
// and the scripts (report, GPU kit, dry-run table) read it there.
#pragma once
#include <functional>
#include <map>

#include "attention/variant.h"

namespace tda {

using AttentionFactory =
    std::function<std::unique_ptr<AttentionVariant>(const ModelConfig&, const AttentionConfig&)>;

struct AttentionKindInfo {
  std::string label;    // the name tables and figures print ("Diff Softmax")
  std::string summary;  // one line: what it is, and its source
  int paper_row = -1;   // its row in the paper's tables (0 first); -1: not in the paper
};

struct AttentionKind {
  AttentionKindInfo info;
  AttentionFactory make;
};

std::map<std::string, AttentionKind>& attention_registry();

struct RegisterAttention {
  RegisterAttention(const std::string& kind, AttentionKindInfo info, AttentionFactory f) {
    attention_registry()[kind] = AttentionKind{std::move(info), std::move(f)};
  }
};

// TDA_REGISTER_ATTENTION("kind", Class, "Label", "summary", paper_row)
#define TDA_REGISTER_ATTENTION(kind, Class, ...)                          \
  static ::tda::RegisterAttention tda_register_##Class(                   \
      kind, ::tda::AttentionKindInfo{__VA_ARGS__},                        \
      [](const ::tda::ModelConfig& m, const ::tda::AttentionConfig& a) {  \
        return std::unique_ptr<::tda::AttentionVariant>(new Class(m, a)); \
      })

}  // namespace tda
