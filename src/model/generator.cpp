#include "model/generator.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/error.h"
#include "model/rope.h"

namespace tda {

Generator::Sizes Generator::sizes(const GPT2& model, int max_context, int prefill_chunk) {
  const ModelConfig& m = model.config();
  Sizes z{};
  z.max_ctx = max_context > 0 ? max_context : rope_trained_context(m);
  z.chunk = std::max(1, std::min(prefill_chunk, z.max_ctx));
  const size_t C = size_t(m.d_model), W = size_t(model.attention().proj_width());
  const size_t T = size_t(z.max_ctx), n = size_t(z.chunk);
  z.rope = rope_table_floats(m, z.max_ctx);
  z.proj_cache = size_t(m.n_layer) * T * W;
  z.act = model.attention().act_floats(1, z.max_ctx);
  z.scratch = model.attention().scratch_floats(1, z.max_ctx);
  z.y = T * C;
  z.row = n * C;
  z.rows4 = n * 4 * C;
  z.logits = size_t(m.vocab_size);
  return z;
}

MemoryNeed Generator::memory_need(const GPT2& model, int max_context, int prefill_chunk) {
  const Sizes z = sizes(model, max_context, prefill_chunk);
  const size_t backend = 2 * z.rope + z.proj_cache + z.act + z.scratch + z.y + 4 * z.row +
                         size_t(z.chunk) + 2 * z.rows4 + z.logits + size_t(z.chunk);
  // The RoPE tables are built on the host first; logits come back to it.
  return {backend * sizeof(float), (2 * z.rope + z.logits) * sizeof(float)};
}

Generator::Generator(GPT2& model, int max_context, int prefill_chunk)
    : model_(model), ops_(model.ops()) {
  const Sizes z = sizes(model, max_context, prefill_chunk);
  max_ctx_ = z.max_ctx;
  chunk_ = z.chunk;
  require_memory(ops_, memory_need(model, max_context, prefill_chunk),
                 "decoder: a context of " + std::to_string(max_ctx_) + " tokens");
  std::vector<float> cos, sin;
  build_rope_tables(model.config(), max_ctx_, cos, sin);
  cos_ = DeviceArray<float>(ops_, cos.size(), "decoder RoPE tables");
  sin_ = DeviceArray<float>(ops_, sin.size(), "decoder RoPE tables");
  cos_.upload(cos.data(), cos.size());
  sin_.upload(sin.data(), sin.size());

  const auto buffer = [&](size_t count) {
    DeviceArray<float> a(ops_, count, "decoder buffers");
    ops_.zero(a.data(), count);  // rows below q_start are read by row-wise pre/post work
    return a;
  };
  proj_cache_ = buffer(z.proj_cache);
  act_ = buffer(z.act);
  scratch_ = buffer(z.scratch);  // AttnContext::scratch
  y_ = buffer(z.y);
  x_ = buffer(z.row);
  ln_ = buffer(z.row);
  rstd_ = buffer(size_t(chunk_));
  atty_ = buffer(z.row);
  xmid_ = buffer(z.row);
  fc_ = buffer(z.rows4);
  fcg_ = buffer(z.rows4);
  logits_dev_ = buffer(z.logits);
  chunk_tokens_ = DeviceArray<int32_t>(ops_, size_t(chunk_), "decoder buffers");
  logits_.assign(z.logits, 0.f);
}

const float* Generator::append(const int32_t* tokens, int n) {
  const ModelConfig& m = model_.config();
  TDA_CHECK(n >= 1, "generator: append needs at least one token");
  TDA_CHECK(position() + n <= max_ctx_, "generator: context of " + std::to_string(position() + n) +
                                            " tokens exceeds max_context " +
                                            std::to_string(max_ctx_));
  for (int i = 0; i < n; ++i)
    TDA_CHECK(tokens[i] >= 0 && tokens[i] < m.vocab_size,
              "generator: token " + std::to_string(tokens[i]) + " out of range");
  for (int i = 0; i < n; i += chunk_) forward_chunk(tokens + i, std::min(chunk_, n - i));
  return logits_.data();
}

const float* Generator::prefill(const std::vector<int32_t>& prompt) {
  reset();
  return append(prompt.data(), int(prompt.size()));
}

// The model's own blocks (GPT2::block_forward) on the chunk's rows, in place on x; attention
// reads the cached proj of every earlier position and computes rows [pos, T) only.
void Generator::forward_chunk(const int32_t* tokens, int n) {
  const ModelConfig& m = model_.config();
  const int pos = position(), T = pos + n, C = m.d_model, W = model_.attention().proj_width();
  const float* P = model_.params_.data();  // read only (friend of GPT2)
  float* x = x_.data();
  chunk_tokens_.upload(tokens, size_t(n));
  ops_.embedding_forward(x, chunk_tokens_.data(), P + model_.wte_, n, C);
  for (int l = 0; l < m.n_layer; ++l) {
    AttnContext ctx{ops_, 1, T, l, m.n_layer, model_.step(), cos_.data(), sin_.data(), 0};
    ctx.q_start = pos;  // rows [pos, T) are new; the kernel skips the others
    ctx.scratch = scratch_.data();
    // One chunk's rows; the two norms share a buffer (ln1 is read before ln2 is written).
    const GPT2::Acts a{x,
                       ln_.data(),
                       rstd_.data(),
                       proj_cache_.data() + size_t(l) * max_ctx_ * W,  // rows 0..max_ctx-1
                       act_.data(),
                       y_.data(),
                       atty_.data(),  // read only under dtype bf16 (GPT2::Acts)
                       xmid_.data(),
                       ln_.data(),
                       rstd_.data(),
                       fc_.data(),
                       fcg_.data()};
    model_.block_forward(l, ctx, n, pos, a, x);
  }
  const float* last = x + size_t(n - 1) * C;
  ops_.rmsnorm_forward(ln_.data(), rstd_.data(), last, P + model_.lnf_, 1, C, float(m.norm_eps));
  ops_.lm_head_logits(logits_dev_.data(), ln_.data(), P + model_.lm_head_, C, m.vocab_size);
  logits_dev_.download(logits_.data(), logits_.size());
  tokens_.insert(tokens_.end(), tokens, tokens + n);
}

int32_t TokenSampler::next(const float* logits, int V) {
  if (o_.temperature <= 0 || o_.top_k == 1)
    return int32_t(std::max_element(logits, logits + V) - logits);
  std::vector<int> idx(static_cast<size_t>(V));
  std::iota(idx.begin(), idx.end(), 0);
  const int k = o_.top_k > 0 ? std::min(o_.top_k, V) : V;
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int a, int b) { return logits[a] > logits[b]; });
  // p_i proportional to exp((l_i - l_max) / T) over the k kept ids; inverse-CDF draw.
  const double mx = logits[idx[0]];
  std::vector<double> p(static_cast<size_t>(k));
  double sum = 0;
  for (int i = 0; i < k; ++i)
    sum += p[size_t(i)] = std::exp((logits[idx[size_t(i)]] - mx) / o_.temperature);
  const double u = rng_.uniform_double() * sum;
  double acc = 0;
  for (int i = 0; i < k; ++i)
    if ((acc += p[size_t(i)]) >= u) return idx[size_t(i)];
  return idx[size_t(k - 1)];
}

std::vector<int32_t> decode(Generator& gen, const GenerateOptions& o) {
  TDA_CHECK(gen.position() >= 1, "decode: empty cache (prefill a prompt first)");
  const int V = gen.model().config().real_vocab_size, max_ctx = gen.max_context();
  const float* logits = gen.logits();
  TokenSampler sampler(o.sampling);
  std::vector<int32_t> out;
  for (int i = 0; i < o.max_new_tokens; ++i) {
    const int32_t t = sampler.next(logits, V);
    out.push_back(t);
    if (std::find(o.stop_tokens.begin(), o.stop_tokens.end(), t) != o.stop_tokens.end()) break;
    if (o.stop_when && o.stop_when(out)) break;
    if (i + 1 == o.max_new_tokens) break;  // no logits needed after the last token
    if (gen.position() < max_ctx) {
      logits = gen.step(t);
    } else {  // sliding window: the last keep - 1 cached tokens and t
      const int keep = std::max(1, max_ctx * 3 / 4);
      const std::vector<int32_t>& c = gen.tokens();
      std::vector<int32_t> w(c.end() - (keep - 1), c.end());
      w.push_back(t);
      logits = gen.prefill(w);
    }
  }
  return out;
}

std::vector<int32_t> generate(Generator& gen, const std::vector<int32_t>& prompt,
                              const GenerateOptions& o) {
  TDA_CHECK(!prompt.empty(), "generate: empty prompt");
  const size_t keep = std::min(prompt.size(), size_t(gen.max_context()));
  gen.prefill(std::vector<int32_t>(prompt.end() - long(keep), prompt.end()));
  return decode(gen, o);
}

void Generator::truncate(int n) {
  TDA_CHECK(n >= 0 && n <= position(),
            "generator: truncate(" + std::to_string(n) + ") outside the cache");
  tokens_.resize(size_t(n));
}

}  // namespace tda
