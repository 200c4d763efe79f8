#include "train/sampler.h"

#include "data/tokenizer.h"
#include "model/generator.h"

namespace tda {

std::vector<int32_t> sample_tokens(GPT2& model, std::vector<int32_t> ctx, const SampleOptions& o) {
  if (ctx.empty()) ctx.push_back(50256);  // <|endoftext|> starts a fresh document
  Generator gen(model, o.max_context);
  GenerateOptions g;
  g.max_new_tokens = o.max_new_tokens;
  g.sampling.temperature = o.temperature;
  g.sampling.top_k = o.top_k;
  g.sampling.seed = o.seed;
  return generate(gen, ctx, g);
}

std::string sample_text(GPT2& model, const std::string& prompt, const SampleOptions& o) {
  static const Gpt2Tokenizer tok = Gpt2Tokenizer::load(Gpt2Tokenizer::default_dir());
  std::vector<int32_t> ctx = tok.encode(prompt);
  return prompt + tok.decode(sample_tokens(model, ctx, o));
}

}  // namespace tda
