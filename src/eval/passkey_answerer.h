// The model side of the passkey test: greedy decoding with the KV cache (model/generator.h).
// The prompts of one trial share the haystack; each prompt reuses the cache up to the longest
// common token prefix with the previous one (exact: the cache holds exactly those tokens).
#pragma once
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "eval/passkey.h"
#include "model/generator.h"

namespace tda {

class GreedyPasskeyAnswerer final : public PasskeyAnswerer {
 public:
  // gen.max_context() must cover the longest prompt plus max_new_tokens.
  GreedyPasskeyAnswerer(Generator& gen, const Gpt2Tokenizer& tok, int max_new_tokens = 8)
      : gen_(gen), tok_(tok), max_new_(max_new_tokens) {}
  // Decodes until a digit run is followed by another character, or max_new_tokens.
  std::vector<std::string> answer(const PasskeyTrial& t) override;
  long long prompt_tokens_reused() const { return reused_; }

 private:
  Generator& gen_;
  const Gpt2Tokenizer& tok_;
  int max_new_;
  long long reused_ = 0;
};

}  // namespace tda
