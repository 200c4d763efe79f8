// Whole-model gradient check: every parameter tensor of a tiny GPT-2 against finite
// differences of the mean cross-entropy.
#include <catch2/catch.hpp>

#include "backend/cpu/cpu_ops.h"
#include "core/config.h"
#include "fd_check.h"
#include "model/gpt2.h"

using namespace tda;

namespace {
Config tiny_model_config(const std::string& kind) {
  // Small dims for speed; vocab 97 padded to 128 so the padding mask is exercised.
  json j = {{"model",
             {{"n_layer", 2},
              {"d_model", 32},
              {"n_head", 2},
              {"seq_len", 19},
              {"vocab_size", 128},
              {"real_vocab_size", 97}}},
            {"attention", {{"kind", kind}}},
            {"train", {{"micro_batch", 3}, {"total_batch_tokens", 57}}}};
  return config_from_json(j, "test");
}
}  // namespace

// gated_softmax too: its backward reads c_attn's output (the gate), which the arena keeps for
// every layer only for such a kind (AttentionVariant::backward_reads_proj); softmax's two layers
// share one.
TEST_CASE("GPT-2 backward matches finite differences for every parameter tensor", "[model]") {
  const std::string kind = GENERATE(as<std::string>{}, "softmax", "gated_softmax");
  INFO(kind);
  Config cfg = tiny_model_config(kind);
  CpuOps ops;
  GPT2 model(cfg.model, cfg.attention, ops);
  model.init_weights(7);
  // Matrices 3x GPT-2's init so every path carries signal above fp32 rounding noise (much
  // larger makes softmax nearly hard and the finite difference itself inaccurate).
  model.update_params([&](float* P) {
    for (const auto& t : model.tensors())
      if (t.shape.size() == 2)
        for (size_t i = 0; i < t.numel; ++i) P[t.offset + i] *= 3.f;
  });
  const int B = 3, T = 19;  // T not a multiple of the attention tile
  model.set_batch(B, T);
  std::vector<int32_t> in(B * T), tg(B * T);
  Rng rng(3);
  for (auto& t : in) t = int32_t(rng.below(97));
  for (auto& t : tg) t = int32_t(rng.below(97));
  model.zero_grad();
  model.forward(in.data(), tg.data(), true, 1.0f / (B * T));
  model.backward();
  std::vector<float> grads(model.grads(), model.grads() + model.flat_size());
  auto loss = [&] { return model.forward(in.data(), tg.data(), false, 0.f); };
  int checked = 0;
  for (const auto& t : model.tensors()) {
    INFO("tensor " << t.name);
    FdResult r{};
    model.update_params([&](float* P) {
      r = fd_directional(P + t.offset, t.numel, grads.data() + t.offset, loss, 100 + checked, 1e-3);
    });
    INFO("numeric " << r.numeric << " analytic " << r.analytic);
    // fp32 through 2 layers: observed errors 1e-5..4e-3 (softmax), up to 2.2e-2 (gated_softmax,
    // whose sigmoid gates add curvature the finite difference sees); a dropped term (a residual
    // path, the RMSNorm mean term, a softmax correction) moves a directional derivative by
    // > 10%, and gated_softmax's backward reading another layer's gate input by > 40%.
    CHECK(r.rel_err < (kind == "softmax" ? 1e-2 : 5e-2));
    ++checked;
  }
  CHECK(checked == int(model.tensors().size()));
  // Padded vocab rows of the LM head never receive gradient.
  const auto& lm = model.tensor("lm_head.weight");
  for (size_t i = 97 * 32; i < lm.numel; ++i) REQUIRE(grads[lm.offset + i] == 0.f);
}

TEST_CASE("GPT-2 is causal: later tokens do not change earlier losses", "[model]") {
  Config cfg = tiny_model_config("softmax");
  CpuOps ops;
  GPT2 model(cfg.model, cfg.attention, ops);
  model.init_weights(1);
  const int T = 19;
  std::vector<int32_t> in(T);
  for (int t = 0; t < T; ++t) in[t] = (t * 7) % 97;
  std::vector<float> a(128), b(128);
  model.forward_logits(in.data(), 10, a.data());  // logits at position 9
  for (int t = 10; t < T; ++t) in[t] = (in[t] + 13) % 97;
  model.forward_logits(in.data(), 10, b.data());
  CHECK(a == b);
}

TEST_CASE("init follows GPT-2 (std 0.02 and scaled residual projections and unit gains)",
          "[model]") {
  Config cfg = config_from_json(
      {{"model", {{"n_layer", 4}, {"d_model", 128}, {"n_head", 2}, {"seq_len", 16}}},
       {"train", {{"micro_batch", 1}, {"total_batch_tokens", 16}}}},
      "test");
  CpuOps ops;
  GPT2 model(cfg.model, cfg.attention, ops);
  model.init_weights(1337);
  auto stdev = [&](const std::string& name) {
    const auto& t = model.tensor(name);
    double s = 0;
    for (size_t i = 0; i < t.numel; ++i)
      s += double(model.params()[t.offset + i]) * model.params()[t.offset + i];
    return std::sqrt(s / t.numel);
  };
  CHECK(stdev("transformer.h.0.attn.c_attn.weight") == Approx(0.02).epsilon(0.02));
  CHECK(stdev("transformer.h.1.mlp.c_proj.weight") == Approx(0.02 / std::sqrt(8.0)).epsilon(0.02));
  CHECK(stdev("transformer.h.3.ln_1.weight") == 1.0);
  GPT2 again(cfg.model, cfg.attention, ops);
  again.init_weights(1337);
  CHECK(std::equal(model.params(), model.params() + model.flat_size(), again.params()));
}

TEST_CASE(
    "init scheme pytorch: torch.nn's defaults (embedding N(0, 1), matrices U(+-1/sqrt(fan_in)))",
    "[model]") {
  Config cfg = config_from_json(
      {{"model", {{"n_layer", 2}, {"d_model", 128}, {"n_head", 2}, {"seq_len", 16}}},
       {"attention", {{"kind", "tda"}}},
       {"train", {{"micro_batch", 1}, {"total_batch_tokens", 16}, {"init_scheme", "pytorch"}}}},
      "test");
  CpuOps ops;
  GPT2 model(cfg.model, cfg.attention, ops);
  model.init_weights(7, cfg.train.init_scheme);
  auto moments = [&](const std::string& name) {
    const auto& t = model.tensor(name);
    double s = 0, largest = 0;
    for (size_t i = 0; i < t.numel; ++i) {
      const double x = model.params()[t.offset + i];
      s += x * x;
      largest = std::max(largest, std::abs(x));
    }
    return std::make_pair(std::sqrt(s / t.numel), largest);
  };
  CHECK(moments("transformer.wte.weight").first == Approx(1.0).epsilon(0.02));
  // U(-b, b) has std b / sqrt(3); b = 1/sqrt(fan_in), fan_in the second dimension.
  for (const auto& [name, fan_in] :
       std::vector<std::pair<std::string, double>>{{"transformer.h.0.attn.c_attn.weight", 128},
                                                   {"transformer.h.1.attn.c_proj.weight", 128},
                                                   {"transformer.h.0.mlp.c_fc.weight", 128},
                                                   {"transformer.h.1.mlp.c_proj.weight", 512},
                                                   {"lm_head.weight", 128}}) {
    INFO(name);
    const auto [sd, largest] = moments(name);
    CHECK(sd == Approx(1 / std::sqrt(3 * fan_in)).epsilon(0.03));
    CHECK(largest <= 1 / std::sqrt(fan_in));
    CHECK(largest > 0.98 / std::sqrt(fan_in));
  }
  // Gains and the kind's scalars keep their declared init.
  CHECK(moments("transformer.h.1.ln_2.weight").first == 1.0);
  const auto& lambda = model.tensor("transformer.h.0.attn.lambda");
  GPT2 gpt2(cfg.model, cfg.attention, ops);
  gpt2.init_weights(7);
  CHECK(model.params()[lambda.offset] == gpt2.params()[lambda.offset]);
  CHECK(model.params()[lambda.offset] != 0.f);
}
