#include "train/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/rng.h"
#include "data/tokenizer.h"

namespace tda {

std::vector<int32_t> sample_tokens(GPT2& model, std::vector<int32_t> ctx, const SampleOptions& o) {
  const auto& m = model.config();
  Rng rng(o.seed);
  std::vector<float> logits(size_t(m.vocab_size));
  std::vector<int32_t> out;
  if (ctx.empty()) ctx.push_back(50256);  // <|endoftext|> starts a fresh document
  for (int n = 0; n < o.max_new_tokens; ++n) {
    // Keep the most recent seq_len tokens as context.
    size_t start = ctx.size() > size_t(m.seq_len) ? ctx.size() - size_t(m.seq_len) : 0;
    std::vector<int32_t> window(ctx.begin() + long(start), ctx.end());
    model.forward_logits(window.data(), int(window.size()), logits.data());
    const int V = m.real_vocab_size;  // padded ids are never sampled
    int next;
    if (o.temperature <= 0 || o.top_k == 1) {
      next = int(std::max_element(logits.begin(), logits.begin() + V) - logits.begin());
    } else {
      std::vector<int> idx(static_cast<size_t>(V));
      std::iota(idx.begin(), idx.end(), 0);
      int k = o.top_k > 0 ? std::min(o.top_k, V) : V;
      std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                        [&](int a, int b) { return logits[size_t(a)] > logits[size_t(b)]; });
      double mx = logits[size_t(idx[0])], sum = 0;
      std::vector<double> p(static_cast<size_t>(k));
      for (int i = 0; i < k; ++i) sum += p[size_t(i)] = std::exp((logits[size_t(idx[size_t(i)])] - mx) / o.temperature);
      double u = rng.uniform_double() * sum, acc = 0;
      next = idx[size_t(k - 1)];
      for (int i = 0; i < k; ++i)
        if ((acc += p[size_t(i)]) >= u) {
          next = idx[size_t(i)];
          break;
        }
    }
    ctx.push_back(next);
    out.push_back(next);
  }
  return out;
}

std::string sample_text(GPT2& model, const std::string& prompt, const SampleOptions& o) {
  static const Gpt2Tokenizer tok = Gpt2Tokenizer::load(Gpt2Tokenizer::default_dir());
  std::vector<int32_t> ctx = tok.encode(prompt);
  return prompt + tok.decode(sample_tokens(model, ctx, o));
}

}  // namespace tda
