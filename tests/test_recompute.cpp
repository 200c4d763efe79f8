// train.recompute (llm.c's -r): the backward recomputes the MLP's GELU (1) and also the two
// RMSNorm outputs (2) instead of keeping one per layer. The recomputation runs the forward's own
// kernels on the forward's own inputs, so loss and every gradient must be the same bits as
// without it, on the CPU and on the emulated CUDA backend in fp32 and bf16; and the activation
// arena must shrink by exactly the buffers it no longer keeps per layer.
#include <catch2/catch.hpp>

#include "core/config.h"
#include "model/gpt2.h"
#include "test_cuda_util.h"
#include "test_kinds.h"

using namespace tda;
using namespace tda::cuda_test;

namespace {

struct Result {
  double loss;
  std::vector<float> grads;
  size_t arena_bytes;  // the activation arena
};

Result step(Ops& ops, const Config& cfg, const std::string& dtype, int recompute, int B, int T) {
  GPT2 model(cfg.model, cfg.attention, ops, dtype);
  model.init_weights(7);
  model.set_recompute(recompute);
  model.set_batch(B, T);
  auto in = tokens(size_t(B) * T, cfg.model.real_vocab_size, 11);
  auto tg = tokens(size_t(B) * T, cfg.model.real_vocab_size, 12);
  model.zero_grad();
  Result r;
  r.loss = model.forward(in.data(), tg.data(), true, 1.0f / float(B * T));
  model.backward();
  std::vector<float> host(model.flat_size());
  ops.download(host.data(), model.grads(), host.size() * sizeof(float));
  r.grads = host;
  r.arena_bytes = model.activation_bytes();
  return r;
}

Config tiny(const std::string& kind) {
  Config cfg = load_config(
      std::string(TDA_SOURCE_DIR) + "/configs/tiny/softmax.json",
      {"attention.kind=" + kind, "model.n_layer=3", "model.d_model=128", "model.n_head=2",
       "model.vocab_size=128", "model.real_vocab_size=100", "model.seq_len=64"});
  return cfg;
}

}  // namespace

TEST_CASE("recompute: GELU and norms recomputed in the backward give the same bits",
          "[cuda][emu]") {
  for (const std::string kind : {"softmax", "tda"}) {
    if (!test_kind(kind)) continue;
    const Config cfg = tiny(kind);
    CpuOps cpu;
    CudaOps gpu;
    struct Case {
      Ops* ops;
      std::string dtype;
    };
    for (const Case& c : {Case{&cpu, "fp32"}, Case{&gpu, "fp32"}, Case{&gpu, "bf16"}}) {
      INFO(kind << " on " << c.ops->name() << ", " << c.dtype);
      const Result r0 = step(*c.ops, cfg, c.dtype, 0, 2, 40);
      for (int level : {1, 2}) {
        INFO("train.recompute " << level);
        const Result r = step(*c.ops, cfg, c.dtype, level, 2, 40);
        CHECK(r.loss == r0.loss);
        CHECK(same_bits(r.grads, r0.grads));
        // the arena keeps one GELU (and per norm one) output instead of n_layer = 3
        const size_t N = 2 * 40, C = 128, e = c.dtype == "bf16" ? 2 : 4;
        const size_t saved = 2 * (4 * N * C + (level == 2 ? 2 * N * C : 0)) * e;
        INFO("arena " << r0.arena_bytes << " -> " << r.arena_bytes << " bytes");
        // each slot is rounded to 256 bytes (backend/slots.h)
        CHECK(std::abs(double(r0.arena_bytes) - double(r.arena_bytes) - double(saved)) <= 3 * 256);
      }
    }
  }
}

TEST_CASE("recompute: train.recompute outside 0..2 is a config error", "[config]") {
  CHECK_THROWS_WITH(load_config(std::string(TDA_SOURCE_DIR) + "/configs/tiny/softmax.json",
                                {"train.recompute=3"}),
                    Catch::Contains("train.recompute"));
  CHECK(
      load_config(std::string(TDA_SOURCE_DIR) + "/configs/tiny/softmax.json", {"train.recompute=2"})
          .train.recompute == 2);
}
