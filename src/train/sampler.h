// Text generation from a model: greedy (temperature 0 or top_k 1) or top-k / temperature
// sampling, GPT-2 BPE in and out. Recomputes the whole context per token (no KV cache yet).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/gpt2.h"

namespace tda {

struct SampleOptions {
  int max_new_tokens = 64;
  int top_k = 40;             // <= 0: whole vocabulary
  double temperature = 1.0;   // 0: greedy
  uint64_t seed = 1337;
};

std::vector<int32_t> sample_tokens(GPT2& model, std::vector<int32_t> context, const SampleOptions& o);
std::string sample_text(GPT2& model, const std::string& prompt, const SampleOptions& o);

}  // namespace tda
