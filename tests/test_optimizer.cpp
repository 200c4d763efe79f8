// The optimizer seam (train/optimizer.h): AdamW's update against its scalar definition through
// both shardings, and an optimizer the trainer does not know (SGD with momentum, one state
// buffer) run by the same sharding wrappers and saved and loaded by checkpoints under the name
// it declares.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "core/config.h"
#include "core/rng.h"
#include "core/safetensors.h"
#include "model/gpt2.h"
#include "test_util.h"
#include "train/checkpoint.h"
#include "train/optimizer.h"

using namespace tda;

namespace {

Config small_config(int zero_stage) {
  json j = {{"model",
             {{"n_layer", 1},
              {"d_model", 32},
              {"n_head", 2},
              {"seq_len", 8},
              {"vocab_size", 64},
              {"real_vocab_size", 60}}},
            {"attention", {{"kind", "softmax"}}},
            {"train", {{"micro_batch", 1}, {"total_batch_tokens", 8}}},
            {"optim", {{"grad_clip", 0.5}, {"weight_decay", 0.1}}},
            {"dist", {{"zero_stage", zero_stage}}}};
  return config_from_json(j, "test");
}

void fill_grads(GPT2& model, uint64_t seed) {
  Rng rng(seed);
  for (const auto& t : model.tensors())
    for (size_t i = 0; i < t.numel; ++i) model.grads()[t.offset + i] = rng.normal() * 0.05f;
}

// v <- mu v + g;  p <- p - lr v  (PyTorch's SGD with momentum, no dampening, no decay).
class MomentumSgd final : public Optimizer {
 public:
  std::string name() const override { return "sgd"; }
  std::vector<OptimizerStateSpec> state() const override {
    return {{"momentum_buffer", "SGD momentum"}};
  }
  void update(Ops& ops, float* p, float* g, float* const* state, size_t n, bool, const OptimStep& s,
              bool zero_grad) override {
    if (s.grad_scale != 1.f) ops.scale(g, n, s.grad_scale);
    ops.axpby(state[0], 1.f, g, 0.9f, n);  // buf = g + 0.9 buf
    ops.axpby(p, -s.lr, state[0], 1.f, n);
    if (zero_grad) ops.zero(g, n);
  }
};

// A one-layer model on the CPU with `opt` under the sharding of `zero_stage`, on one rank.
struct Rig {
  Config cfg;
  CpuOps ops;
  LocalCommunicator comm;
  GPT2 model;
  std::unique_ptr<DataParallelOptimizer> dp;
  Rig(int zero_stage, uint64_t seed, std::unique_ptr<Optimizer> opt)
      : cfg(small_config(zero_stage)), model(cfg.model, cfg.attention, ops) {
    model.init_weights(seed);
    if (!opt) opt = make_optimizer(cfg.optim);
    dp = make_data_parallel_optimizer(std::move(opt), model, ops, comm, cfg.optim, cfg.dist);
  }
  std::vector<float> params() const { return {model.params(), model.params() + model.flat_size()}; }
  std::vector<float> grads() { return {model.grads(), model.grads() + model.flat_size()}; }
};

}  // namespace

TEST_CASE("optimizer: AdamW through both shardings equals its scalar definition", "[optimizer]") {
  for (int stage : {0, 1}) {
    INFO("zero_stage " << stage);
    Rig rig(stage, 3, nullptr);  // the config's optimizer: AdamW
    GPT2& model = rig.model;
    auto& dp = rig.dp;
    REQUIRE(dp->optimizer().state().size() == 2);
    std::vector<float> p = rig.params();
    std::vector<double> m(p.size(), 0.0), v(p.size(), 0.0);
    const auto& o = rig.cfg.optim;
    for (int t = 1; t <= 3; ++t) {
      fill_grads(model, 10 + uint64_t(t));
      const std::vector<float> g = rig.grads();
      double sq = 0;
      for (float x : g) sq += double(x) * x;
      const double norm = std::sqrt(sq);
      const double clip = norm > o.grad_clip ? o.grad_clip / (norm + 1e-6) : 1.0;
      double got_norm = 0, checked = -1;
      dp->step(
          1e-3, t, &got_norm, [&](double n) { checked = n; }, [](const char*) {});
      CHECK(checked == got_norm);
      CHECK(got_norm == Approx(norm).epsilon(1e-9));
      for (const auto& ten : model.tensors()) {
        const double wd = ten.decay ? o.weight_decay : 0.0;
        for (size_t i = ten.offset; i < ten.offset + ten.numel; ++i) {
          const double gi = double(g[i]) * clip;
          m[i] = o.beta1 * m[i] + (1 - o.beta1) * gi;
          v[i] = o.beta2 * v[i] + (1 - o.beta2) * gi * gi;
          const double mh = m[i] / (1 - std::pow(o.beta1, t)),
                       vh = v[i] / (1 - std::pow(o.beta2, t));
          p[i] = float(double(p[i]) * (1 - 1e-3 * wd) - 1e-3 * mh / (std::sqrt(vh) + o.eps));
        }
      }
      double worst = 0;
      for (size_t i = 0; i < p.size(); ++i)
        worst = std::max(worst, std::fabs(double(model.params()[i]) - p[i]));
      CHECK(worst < 1e-6);
      CHECK(dp->zeroes_grads() == (stage == 0));
    }
  }
}

TEST_CASE("optimizer: any optimizer runs under both shardings and checkpoints its own state",
          "[optimizer]") {
  TempDir dir;
  std::vector<std::vector<float>> params, saved_state;
  for (int stage : {0, 1}) {
    INFO("zero_stage " << stage);
    Rig rig(stage, 5, std::make_unique<MomentumSgd>());
    GPT2& model = rig.model;
    auto& dp = rig.dp;
    const std::vector<float> p0 = rig.params();
    fill_grads(model, 21);
    const std::vector<float> g = rig.grads();
    double norm = 0;
    dp->step(
        0.1, 1, &norm, [](double) {}, [](const char*) {});
    const double clip = norm > 0.5 ? 0.5 / (norm + 1e-6) : 1.0;
    for (const auto& ten : model.tensors())
      for (size_t i = ten.offset; i < ten.offset + ten.numel; ++i)
        REQUIRE(model.params()[i] == Approx(p0[i] - 0.1 * g[i] * clip).margin(1e-6));
    params.push_back(rig.params());

    // The checkpoint holds the state under the name the optimizer declares, and loads back.
    std::vector<std::vector<float>> state = dp->gather_state();
    REQUIRE(state.size() == 1);
    saved_state.push_back(state[0]);
    const std::string ck = dir.path + "/step_" + std::to_string(stage);
    TrainState st;
    st.config = rig.cfg.raw;
    save_checkpoint(ck, model, state_buffers(dp->optimizer(), state), st);
    SafetensorsFile f(ck + "/optimizer.safetensors");
    const auto& first = model.tensors().front();
    std::vector<float> buf(first.numel);
    f.read_into(first.name + ".momentum_buffer", first.shape, buf.data());
    for (size_t i = 0; i < first.numel; ++i) REQUIRE(buf[i] == state[0][first.offset + i]);
    std::vector<float> back(model.flat_size(), 0.f);
    load_checkpoint(ck, model, {{"momentum_buffer", back.data()}});
    for (const auto& ten : model.tensors())
      for (size_t i = ten.offset; i < ten.offset + ten.numel; ++i) REQUIRE(back[i] == state[0][i]);
    // An optimizer that declares other state is refused by name.
    std::vector<float> m(model.flat_size());
    REQUIRE_THROWS_WITH(load_checkpoint(ck, model, {{"exp_avg", m.data()}}),
                        Catch::Contains("exp_avg"));
    dp->load_state(state);
  }
  // ZeRO-1 on one rank is the replicated step (here the clip is a separate pass in both).
  REQUIRE(params[0] == params[1]);
  REQUIRE(saved_state[0] == saved_state[1]);
}
