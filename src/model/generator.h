// Autoregressive decoding with a KV cache, shared by `tda sample` and the evaluators (passkey,
// long-context). Public API:
//
//   Generator gen(model, /*max_context=*/4096);     // RoPE tables up to 4096 (NTK factor applied)
//   const float* logits = gen.prefill(prompt);      // logits after the prompt's last token
//   TokenSampler pick(SamplingOptions{});           // default: greedy
//   int32_t t = pick.next(logits, V_real);
//   logits = gen.step(t);                           // one token: O(T*C) per layer, not O(T^2)
//
//   // or all at once (stop tokens, a stop predicate, sliding window past max_context):
//   std::vector<int32_t> out = generate(gen, prompt, GenerateOptions{...});
//   gen.truncate(n); gen.append(...); decode(gen, opts);   // reuse a cached prefix
//
// What is cached: per layer, the rows of the attention input projection proj = c_attn(x) (width
// variant.proj_width()) for positions 0..T-1. A new chunk of n tokens at positions [pos, pos+n)
// runs the trunk (embedding, norms, c_attn, c_proj, MLP, LM head) on its n rows only; the
// attention variant runs over the cached proj rows 0..pos+n-1 with AttnContext::q_start = pos,
// so the kernel computes query rows >= pos only (each against every key j <= i). Everything a
// mechanism derives from the absolute row index (TRA/TDA thresholds tau_i, ssmax's log(i+1),
// RoPE angles) is therefore computed exactly as in a full forward: exact by construction.
// Per new token and layer: the trunk costs O(C^2), the kernel O(T*C) and the variant's row-wise
// pre/post work (RoPE, q/k normalisation, head splits/norms) O(T*C) over the prefix rows (dex
// also re-applies its d x d matrix to every row: O(T*C*d)). Memory: L * max_context * proj_width
// floats of cache plus one variant activation buffer for max_context.
//
// Contexts: max_context may exceed model.seq_len (RoPE tables are built up to it, using
// model.rope_ntk_factor); append() past max_context throws. generate() then slides a window.
// Buffers live in the model's backend memory (DeviceArray); tokens are uploaded per chunk and
// logits downloaded, so logits() is host memory on every backend.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "backend/device_array.h"
#include "core/rng.h"
#include "model/gpt2.h"

namespace tda {

class Generator {
 public:
  // max_context <= 0: the model's trained context (seq_len * max(1, rope_ntk_factor)).
  // Prompts are processed in chunks of prefill_chunk rows (bounds the trunk's buffers).
  explicit Generator(GPT2& model, int max_context = 0, int prefill_chunk = 512);
  // What the constructor allocates for these arguments: checked by the commands before, with
  // the option that set max_context (backend/memory_check.h), and by the constructor itself.
  static MemoryNeed memory_need(const GPT2& model, int max_context = 0, int prefill_chunk = 512);

  const GPT2& model() const { return model_; }
  int max_context() const { return max_ctx_; }
  int position() const { return int(tokens_.size()); }  // tokens in the cache
  const std::vector<int32_t>& tokens() const { return tokens_; }

  void reset() { tokens_.clear(); }
  // Keeps the first n cached tokens (n <= position()); the next append overwrites the rest.
  // Reuses a shared prefix (several questions over one document). logits() is stale until then.
  void truncate(int n);
  // Appends tokens at positions [position(), position() + n) and returns the logits (V_padded
  // floats; ids >= real_vocab_size are padding) after the last of them. n >= 1.
  const float* append(const int32_t* tokens, int n);
  const float* prefill(const std::vector<int32_t>& prompt);  // reset() + append
  const float* step(int32_t token) { return append(&token, 1); }
  const float* logits() const { return logits_.data(); }

 private:
  void forward_chunk(const int32_t* tokens, int n);
  // The floats of each decoder buffer, in the constructor's order: one formula for the
  // allocation and for memory_need.
  struct Sizes {
    int max_ctx, chunk;
    size_t rope, proj_cache, act, scratch, y, row, rows4, logits;
  };
  static Sizes sizes(const GPT2& model, int max_context, int prefill_chunk);

  GPT2& model_;
  Ops& ops_;
  int max_ctx_, chunk_;
  std::vector<int32_t> tokens_;  // host copy of the cached tokens
  DeviceArray<float> cos_, sin_;
  DeviceArray<float> proj_cache_;  // (L, max_ctx, proj_width)
  DeviceArray<float> act_, y_;     // variant activations, variant output (max_ctx, C)
  DeviceArray<float> scratch_;     // the variant's forward scratch (AttnContext::scratch)
  DeviceArray<float> x_, ln_, rstd_, atty_, xmid_, fc_, fcg_, logits_dev_;  // rows of one chunk
  DeviceArray<int32_t> chunk_tokens_;
  std::vector<float> logits_;  // host copy
};

struct SamplingOptions {
  double temperature = 0.0;  // <= 0: greedy (argmax)
  int top_k = 0;             // <= 0: whole vocabulary; 1: greedy
  uint64_t seed = 1337;
};

// Picks tokens from logits: argmax (ties: lowest id) when greedy, else softmax(logits / T)
// restricted to the top_k largest, drawn with a seeded RNG. Only ids < V_real are drawn.
class TokenSampler {
 public:
  explicit TokenSampler(const SamplingOptions& o) : o_(o), rng_(o.seed) {}
  int32_t next(const float* logits, int V_real);

 private:
  SamplingOptions o_;
  Rng rng_;
};

struct GenerateOptions {
  SamplingOptions sampling;
  int max_new_tokens = 64;
  std::vector<int32_t> stop_tokens;  // generation ends after emitting one of these
  // Called after each new token with everything generated so far; true ends generation.
  std::function<bool(const std::vector<int32_t>&)> stop_when;
};

// Generates up to max_new_tokens continuing the cache (position() >= 1; starts from logits()).
// When the context reaches gen.max_context(), the cache is rebuilt from the most recent
// 3/4 * max_context tokens (a sliding window: positions restart at 0); within max_context
// decoding is exact.
std::vector<int32_t> decode(Generator& gen, const GenerateOptions& o);
// prefill(prompt) + decode. A prompt longer than max_context keeps its last max_context tokens.
std::vector<int32_t> generate(Generator& gen, const std::vector<int32_t>& prompt,
                              const GenerateOptions& o);

}  // namespace tda
