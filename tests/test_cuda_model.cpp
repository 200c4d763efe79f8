// End to end: a tiny GPT-2 (configs/tiny/softmax.json, shrunk) trained for a few steps with
// CudaOps (every op on the SIMT emulator) and with CpuOps from the same init and the same
// batches, each step as Trainer::train_step does it: zero_grad, forward + backward, grad norm
// (sum_squares), clipping (scale), AdamW per tensor (decay on matrices only).
// Every buffer lives in the backend's memory (GPT2's arena, DeviceArray here); host data moves
// by upload/download only.
#include <catch2/catch.hpp>

#include "core/config.h"
#include "model/gpt2.h"
#include "test_cuda_util.h"

using namespace tda;
using namespace tda::cuda_test;

namespace {
struct Run {
  std::vector<double> losses, norms;
  std::vector<float> params;
};

Run train(Ops& ops, const Config& cfg, int steps, int B, int T) {
  GPT2 model(cfg.model, cfg.attention, ops);
  model.init_weights(1337);
  model.set_batch(B, T);
  const size_t P = model.flat_size();
  DeviceArray<float> m(ops, P, "AdamW m"), v(ops, P, "AdamW v");
  ops.zero(m.data(), P);
  ops.zero(v.data(), P);
  const auto& o = cfg.optim;
  Run r;
  for (int step = 0; step < steps; ++step) {
    // One batch, seen every step: the loss must fall (memorisation), a check that the updates
    // point the right way and not only that both backends agree.
    auto in = tokens(size_t(B) * T, cfg.model.real_vocab_size, 100);
    auto tg = tokens(size_t(B) * T, cfg.model.real_vocab_size, 200);
    model.zero_grad();
    r.losses.push_back(model.forward(in.data(), tg.data(), true, 1.0f / float(B * T)));
    model.backward();
    const double norm = std::sqrt(ops.sum_squares(model.grads(), P));
    r.norms.push_back(norm);
    if (o.grad_clip > 0 && norm > o.grad_clip)
      ops.scale(model.grads(), P, float(o.grad_clip / (norm + 1e-6)));
    model.update_params([&](float* params) {
      for (const auto& t : model.tensors())
        ops.adamw(params + t.offset, model.grads() + t.offset, m.data() + t.offset,
                  v.data() + t.offset, t.numel, float(o.lr), float(o.beta1), float(o.beta2),
                  float(o.eps), t.decay ? float(o.weight_decay) : 0.f, step + 1);
    });
  }
  r.params = model.params_to_host();
  return r;
}
}  // namespace

TEST_CASE("cuda: tiny GPT-2 trains like the CPU backend on the emulator", "[cuda][emu]") {
  // Vocabulary 128 padded / 100 real keeps the emulated LM head small and exercises the mask;
  // two layers and two heads (head dim 32) exercise the per-layer and per-head paths.
  const Config cfg =
      load_config(std::string(TDA_SOURCE_DIR) + "/configs/tiny/softmax.json",
                  {"model.n_layer=2", "model.d_model=64", "model.n_head=2", "model.seq_len=32",
                   "model.vocab_size=128", "model.real_vocab_size=100"});
  const int steps = 5, B = 2, T = 32;
  // Device memory is PROT_NONE outside kernels and memcpys: a host dereference of any CUDA
  // buffer in the model, the attention variant or this loop would crash the test, so passing
  // shows the CUDA path keeps device data on the device (tests/test_cuda_guard.cpp checks the
  // guard itself).
  HostAccessGuard guard;
  CpuOps cpu;
  CudaOps gpu;
  const Run ref = train(cpu, cfg, steps, B, T);
  const Run got = train(gpu, cfg, steps, B, T);
  for (int s = 0; s < steps; ++s) {
    INFO("step " << s << " loss cpu " << ref.losses[s] << " cuda " << got.losses[s] << " norm cpu "
                 << ref.norms[s] << " cuda " << got.norms[s]);
    // The CUDA attention runs its products on bf16 tensor cores (q, k, v, dout and the weights
    // rounded to bf16, unit roundoff 2^-9 ~ 2e-3; attention outputs within ~3e-3 and gradients
    // within ~7e-3 of the CPU, tests/test_cuda_attention.cpp), every other op in fp32. Observed
    // <= 5e-5 relative for the loss and <= 1.2e-3 for the grad norm; bounds 5e-4 / 1e-2.
    CHECK(std::fabs(got.losses[s] - ref.losses[s]) <= 5e-4 * ref.losses[s]);
    CHECK(std::fabs(got.norms[s] - ref.norms[s]) <= 1e-2 * ref.norms[s]);
  }
  CHECK(got.losses.back() < got.losses.front() - 0.05);  // it learns
  // Deterministic (no float atomics anywhere): a shuffled emulator schedule gives the same bits,
  // which is what bit-exact resume needs.
  {
    ScheduleSeed guard(3);
    CudaOps gpu2;
    const Run again = train(gpu2, cfg, steps, B, T);
    CHECK(again.losses == got.losses);
    CHECK(same_bits(again.params, got.params));
  }
  // Parameters: AdamW moves each by at most ~lr per step, so a gradient rounding difference can
  // move a parameter by up to lr per step where the gradient is near 0 (m / sqrt(v) flips);
  // the bound is on the tensor scale (norm gains 1); observed ~7e-3 with bf16 attention
  // (~2e-6 when attention was fp32), bound 3e-2.
  INFO("parameter rel_err " << rel_err(got.params, ref.params));
  CHECK(rel_err(got.params, ref.params) < 3e-2);
}

// The model owns the backend's bf16 path (backend/mixed_precision.h): a bf16 model registers its
// weights with the backend and unregisters them when destroyed, so a later fp32 model on the
// same backend gets fp32 GEMMs, and no buffer later allocated where the old weights were is read
// through their stale bf16 copy.
TEST_CASE("cuda: a destroyed bf16 model leaves its backend in fp32", "[cuda][emu]") {
  const Config cfg =
      load_config(std::string(TDA_SOURCE_DIR) + "/configs/tiny/softmax.json",
                  {"model.n_layer=1", "model.d_model=64", "model.n_head=1", "model.seq_len=16",
                   "model.vocab_size=128", "model.real_vocab_size=100"});
  const auto in = tokens(16, 100, 1), tg = tokens(16, 100, 2);
  auto loss = [&](Ops& ops, const std::string& dtype) {
    GPT2 m(cfg.model, cfg.attention, ops, dtype);
    m.init_weights(5);
    m.set_batch(1, 16);
    return m.forward(in.data(), tg.data(), false, 0.f);
  };
  CudaOps fresh, reused;
  const double fp32 = loss(fresh, "fp32");
  const double bf16 = loss(reused, "bf16");
  CHECK(bf16 != fp32);                  // the bf16 path was taken
  CHECK(loss(reused, "fp32") == fp32);  // and left with its model
}
