// Text generation from a model: greedy (temperature 0 or top_k 1) or top-k / temperature
// sampling, GPT-2 BPE in and out, through the KV-cache Generator (model/generator.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/gpt2.h"

namespace tda {

struct SampleOptions {
  int max_new_tokens = 64;
  int top_k = 40;            // <= 0: whole vocabulary
  double temperature = 1.0;  // 0: greedy
  uint64_t seed = 1337;
  // Longest context kept in the KV cache (RoPE tables built up to it); 0: the model's trained
  // context. Beyond it the window slides (generate() in model/generator.h).
  int max_context = 0;
};

// An empty context starts from <|endoftext|> (a fresh document).
std::vector<int32_t> sample_tokens(GPT2& model, std::vector<int32_t> context,
                                   const SampleOptions& o);
std::string sample_text(GPT2& model, const std::string& prompt, const SampleOptions& o);

}  // namespace tda
