// Helpers for the evaluation/export tests: a random-init tiny model of any mechanism, saved as
// a checkpoint, with every learnable scalar/vector moved away from its init value.
#pragma once
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "core/config.h"
#include "core/rng.h"
#include "eval/mc_data.h"
#include "model/gpt2.h"
#include "test_kinds.h"
#include "test_util.h"
#include "train/checkpoint.h"

namespace tda {

// The kind's tiny config (test_kinds.h) with a small vocabulary (300 real, padded to 384) and
// seq_len. small_vocab false keeps GPT-2's vocabulary (for tests that tokenize text).
inline Config tiny_eval_config(const std::string& kind, int seq_len,
                               std::vector<std::string> overrides = {}, bool small_vocab = true) {
  overrides.push_back("model.seq_len=" + std::to_string(seq_len));
  if (small_vocab) {
    overrides.push_back("model.vocab_size=384");
    overrides.push_back("model.real_vocab_size=300");
  }
  overrides.push_back("train.micro_batch=1");
  overrides.push_back("train.total_batch_tokens=" + std::to_string(seq_len));
  return load_kind_config("tiny", kind, overrides);
}

// Matrices x5 (GPT-2 init is so small that attention is near uniform and logits near flat:
// the comparison would not see a wrong mechanism), 1-D tensors + 0.2 N(0,1), dex_W random,
// and per-layer scalars set so that clamps and guards are exercised (tda lambda 1.3 > 1,
// beta -0.1 < 0 in layer 1).
inline void perturb_for_test(GPT2& model, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> host = model.params_to_host();
  float* P = host.data();
  for (const auto& t : model.tensors()) {
    float* p = P + t.offset;
    const bool layer1 = t.name.find(".h.1.") != std::string::npos;
    const auto ends = [&](const std::string& s) {
      return t.name.size() >= s.size() &&
             t.name.compare(t.name.size() - s.size(), s.size(), s) == 0;
    };
    if (ends("attn.dex_W")) {
      for (size_t i = 0; i < t.numel; ++i) p[i] = 0.1f * rng.normal();
    } else if (t.shape.size() == 2) {
      for (size_t i = 0; i < t.numel; ++i) p[i] *= 5.f;
    } else if (ends("attn.lambda")) {
      p[0] = layer1 ? 1.3f : 0.35f;
    } else if (ends("attn.beta")) {
      p[0] = layer1 ? -0.1f : 0.6f;
    } else if (ends("attn.dex_lambda")) {
      p[0] = layer1 ? -0.3f : 0.4f;
    } else {
      for (size_t i = 0; i < t.numel; ++i) p[i] += 0.2f * rng.normal();
    }
  }
  model.params_from_host(P);
}

// A multiple-choice item: one context, the continuations as choices.
inline McItem mc_item(const std::string& ctx, const std::vector<std::string>& conts, int gold) {
  McItem it;
  for (const auto& c : conts) it.choices.push_back({ctx, c});
  it.gold = gold;
  return it;
}

// Writes a checkpoint of a perturbed random model into dir; returns the config.
inline Config write_tiny_checkpoint(const std::string& dir, const std::string& kind, int seq_len,
                                    const std::vector<std::string>& overrides = {}, int step = 300,
                                    bool small_vocab = true) {
  Config cfg = tiny_eval_config(kind, seq_len, overrides, small_vocab);
  CpuOps ops;
  GPT2 model(cfg.model, cfg.attention, ops);
  model.init_weights(11);
  perturb_for_test(model, 5);
  std::vector<float> m(model.flat_size(), 0.f), v(model.flat_size(), 0.f);
  TrainState st;
  st.step = step;
  st.config = cfg.raw;
  save_checkpoint(dir, model, {{"exp_avg", m.data()}, {"exp_avg_sq", v.data()}}, st);
  return cfg;
}

}  // namespace tda
