#include "attention/registry.h"

#include <algorithm>

#include "core/error.h"
#include "core/rng.h"

namespace tda {

std::map<std::string, AttentionKind>& attention_registry() {
  static std::map<std::string, AttentionKind> r;
  return r;
}

void init_param(float* p, size_t n, ParamSpec::Init init, float a, Rng& rng) {
  using I = ParamSpec::Init;
  for (size_t i = 0; i < n; ++i) {
    switch (init) {
      case I::kNormal:
        p[i] = a * rng.normal();
        break;
      case I::kZeros:
        p[i] = 0.f;
        break;
      case I::kOnes:
        p[i] = 1.f;
        break;
      case I::kConst:
        p[i] = a;
        break;
      case I::kUniform:
        p[i] = a * (2.f * rng.uniform() - 1.f);
        break;
    }
  }
}

AttentionTraits traits_of_math(AttnMath m, int power) {
  AttentionTraits t;
  switch (m) {
    case AttnMath::kSoftmax:
      t.normalised = t.dense = true;
      break;
    case AttnMath::kEntmax:
    case AttnMath::kSoftplus:
      t.normalised = true;
      break;
    case AttnMath::kDiffSoftmax:
      break;
    case AttnMath::kRelu:
    case AttnMath::kDiffRelu:
    case AttnMath::kThreshold:
    case AttnMath::kDiffThreshold:
      if (power == 1 || m == AttnMath::kRelu || m == AttnMath::kDiffRelu) {
        // a T = 70 row has ~10^4 scores at density ~0.4 near the kink: a +-h segment of 1e-4
        // rarely crosses one, and fp32 noise / h stays under the check's atol
        t.fd_step = 1e-4;
        t.cuda_y = 5e-2;
        t.cuda_grad = 0.2;
        t.step1_grad_norm = 0.1;
      } else {
        t.cuda_grad = 5e-2;  // the threshold's derivative still jumps in its scale
        t.step1_grad_norm = 5e-2;
      }
      break;
  }
  return t;
}

void check_attention_sets(const Config& cfg, const std::vector<std::string>& sets) {
  const std::string prefix = "attention.";
  make_attention(cfg.model, cfg.attention);  // an unknown kind: the registry's message
  std::vector<std::string> mine;
  for (const auto& o : attention_registry().at(cfg.attention.kind).info.options)
    mine.push_back(o.key);
  for (const auto& kv : sets) {
    if (kv.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string key = kv.substr(prefix.size(), kv.find('=') - prefix.size());
    const auto& code = attention_code_keys();
    if (key == "kind" || std::find(code.begin(), code.end(), key) != code.end() ||
        std::find(mine.begin(), mine.end(), key) != mine.end())
      continue;
    std::string readers, own;
    for (const auto& [name, kind] : attention_registry())
      for (const auto& o : kind.info.options)
        if (o.key == key) readers += (readers.empty() ? "" : ", ") + name;
    for (const auto& k : mine) own += (own.empty() ? "" : ", ") + k;
    throw Error("--set " + prefix + key + ": attention.kind '" + cfg.attention.kind +
                "' has no option '" + key + "' (its options: " + (own.empty() ? "none" : own) +
                "; '" + key + "' is read by: " + (readers.empty() ? "no kind" : readers) + ")");
  }
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
  return it->second.make(m, a);
}

}  // namespace tda
