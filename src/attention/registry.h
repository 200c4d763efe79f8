// attention.kind -> variant. Each variant file registers itself with TDA_REGISTER_ATTENTION,
// together with what the tools say of it (label, one-line summary, its row in the paper's
// tables, the options it reads), so adding a mechanism is adding one file; `tda kinds [--json]`
// prints the registry, and the scripts (report, GPU kit, dry-run table) read it there.
#pragma once
#include <functional>
#include <map>

#include "attention/variant.h"

namespace tda {

using AttentionFactory =
    std::function<std::unique_ptr<AttentionVariant>(const ModelConfig&, const AttentionConfig&)>;

struct AttentionKindInfo {
  AttentionKindInfo() = default;
  AttentionKindInfo(std::string label_, std::string summary_, int paper_row_ = -1,
                    std::vector<AttentionOptionSpec> options_ = {}, std::string torch_forward_ = "")
      : label(std::move(label_)),
        summary(std::move(summary_)),
        paper_row(paper_row_),
        options(std::move(options_)),
        torch_forward(std::move(torch_forward_)) {}
  std::string label;    // the name tables and figures print ("Diff Softmax")
  std::string summary;  // one line: what it is, and its source
  int paper_row = -1;   // its row in the paper's tables (0 first); -1: not in the paper
  // The attention.<key> options it reads, with their defaults, bounds and documentation: the
  // config's defaults are built from these (core/config.h), `tda kinds` prints them, and --set
  // of a key the configured kind does not declare is an error naming the kind.
  std::vector<AttentionOptionSpec> options;
  // A kind whose PyTorch forward is not in python/tda_hf/modeling_tda.py gives it here, as one
  // expression of `self` (an Attention: _qkv, _relu_scores, p(name), a[option], D), `proj` and
  // `ctx`, returning y (B, T, C); `tda export` adds it to the exported modeling_tda.py.
  std::string torch_forward;
};

struct AttentionKind {
  AttentionKindInfo info;
  AttentionFactory make;
};

std::map<std::string, AttentionKind>& attention_registry();

// `--set attention.<key>=...` (the command line's overrides, in `sets`) of a key that the
// configured kind does not declare (AttentionKindInfo::options) is an error naming the kind, its
// options and the kinds that read the key: a knob that would silently do nothing.
void check_attention_sets(const Config& cfg, const std::vector<std::string>& sets);

struct RegisterAttention {
  RegisterAttention(const std::string& kind, AttentionKindInfo info, AttentionFactory f) {
    for (const auto& o : info.options) declare_attention_option(o, kind);
    attention_registry()[kind] = AttentionKind{std::move(info), std::move(f)};
  }
};

// TDA_REGISTER_ATTENTION("kind", Class, "Label", "summary", paper_row[, {options}[,
// "torch_forward"]])
#define TDA_REGISTER_ATTENTION(kind, Class, ...)                          \
  static ::tda::RegisterAttention tda_register_##Class(                   \
      kind, ::tda::AttentionKindInfo{__VA_ARGS__},                        \
      [](const ::tda::ModelConfig& m, const ::tda::AttentionConfig& a) {  \
        return std::unique_ptr<::tda::AttentionVariant>(new Class(m, a)); \
      })

}  // namespace tda
