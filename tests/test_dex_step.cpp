// dex anneals lambda(t) with the optimizer step (src/attention/dex.cpp). Everything that runs
// the model outside the training step must run it at the checkpoint's step: the trainer's own
// validation (also right after a resume) and `tda diag`. Each is compared with the model as the
// training step at that step runs it (GPT2::set_step(s)), and with a control at another step
// that shows the comparison can fail.
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_ops.h"
#include "core/fs.h"
#include "core/rng.h"
#include "data/loader.h"
#include "data/shard.h"
#include "eval/diagnostics.h"
#include "eval/loaded_model.h"
#include "test_eval_util.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

using namespace tda;

namespace {

// Mean validation loss of `model` as Trainer::evaluate computes it (same loader, same batches).
double val_loss(GPT2& model, const Config& cfg) {
  const auto& t = cfg.train;
  DataLoader val(cfg.data.val, t.micro_batch, cfg.model.seq_len, cfg.model.real_vocab_size, false,
                 t.seed);
  model.set_batch(t.micro_batch, cfg.model.seq_len);
  std::vector<int32_t> in(size_t(t.micro_batch) * cfg.model.seq_len), tg(in.size());
  double sum = 0;
  for (int i = 0; i < t.val_batches; ++i) {
    val.next(in.data(), tg.data());
    sum += model.forward(in.data(), tg.data(), false, 0.f);
  }
  return sum / t.val_batches;
}

// The loss of the checkpoint's weights with the mechanism at `step`.
double val_loss_at(const std::string& ckpt, long step) {
  LoadedModel lm = load_model_for_eval(ckpt);
  lm.model->set_step(step);
  return val_loss(*lm.model, lm.cfg);
}

}  // namespace

TEST_CASE("dex: validation at step s runs lambda(s) also right after a resume", "[training][dex]") {
  REQUIRE(path_exists(source_dir() + "/data/tinyshakespeare/tiny_shakespeare_val.bin"));
  TempDir a, b;
  // Anneal over 8 steps so lambda(t) changes by a lot from one step to the next.
  Config cfg = load_config(
      source_dir() + "/configs/tiny/dex.json",
      {"train.max_steps=3", "train.val_every=1", "train.val_batches=1", "train.micro_batch=2",
       "train.total_batch_tokens=256", "train.checkpoint_every=1", "train.keep_checkpoints=10",
       "attention.dex_anneal_steps=8", "optim.warmup_steps=1"});
  std::vector<double> logged;
  {
    TrainOptions to;
    to.out_dir = a.path;
    Trainer t(cfg, to);
    // dex_W starts at 0, where lambda has no effect: move it off so the step matters.
    Rng rng(3);
    std::vector<float> p = t.model().params_to_host();
    for (const auto& ten : t.model().tensors())
      if (ten.name.find("dex_W") != std::string::npos)
        for (size_t i = 0; i < ten.numel; ++i) p[ten.offset + i] = 0.5f * rng.normal();
    t.model().params_from_host(p.data());
    REQUIRE(t.run() == 0);
    logged = t.val_history();  // steps 0, 1, 2 in the loop, then 3 at the end
  }
  REQUIRE(logged.size() == 4);
  for (int s = 1; s <= 3; ++s) {
    const std::string ck = a.path + "/checkpoints/" + checkpoint_dir_name(s);
    INFO("step " << s);
    const double ref = val_loss_at(ck, s), other = val_loss_at(ck, s - 1);
    // Same weights, same batches, same CPU kernels: only the step differs between them, so
    // the logged loss must equal ref up to summation order (1e-9 relative). The control: the
    // previous step's lambda moves the loss by over 1000x that.
    CHECK(std::abs(ref - other) > 1e-5);
    CHECK(logged[size_t(s)] == Approx(ref).epsilon(1e-9).margin(0));
  }
  // Resumed from step 2 into a new run directory: its first validation is at step 2.
  TrainOptions to;
  to.out_dir = b.path;
  to.resume = a.path + "/checkpoints/" + checkpoint_dir_name(2);
  Trainer t(cfg, to);
  REQUIRE(t.step() == 2);
  CHECK(t.evaluate() == Approx(val_loss_at(to.resume, 2)).epsilon(1e-9).margin(0));
}

TEST_CASE("dex: tda diag runs the model at the checkpoint's step", "[eval][diag][dex]") {
  TempDir dir;
  const std::string ck = dir.path + "/ckpt";
  // Step 300 of a 715-step anneal: lambda(300) = 0.58 * 0.42 * lambda_init + 0.42 dex_lambda.
  const Config cfg =
      write_tiny_checkpoint(ck, "dex", 64, {"attention.dex_anneal_steps=715"}, /*step=*/300);
  const int T = 40;
  std::vector<uint16_t> toks(T);
  Rng rng(8);
  for (auto& x : toks) x = uint16_t(rng.below(uint64_t(cfg.model.real_vocab_size)));
  write_shard(dir.path + "/toks.bin", toks.data(), toks.size());
  std::string out;
  REQUIRE(run_tda("diag --checkpoint " + ck + " --tokens-file " + dir.path + "/toks.bin --T " +
                      std::to_string(T) + " --out " + dir.path + "/diag.json",
                  &out) == 0);
  const json got = json::parse(read_file_bytes(dir.path + "/diag.json"));

  std::vector<int32_t> ids(toks.begin(), toks.end());
  auto report_at = [&](long step) {
    CpuOps cpu;
    ProbeOps probe(cpu);
    GPT2 model(cfg.model, cfg.attention, probe);
    load_checkpoint(ck, model);
    model.set_step(step);
    return run_diagnostics(model, probe, {ids}, DiagOptions{});
  };
  // Layer 1's maps see layer 0's dex output, o - lambda(t) f_D(o): they depend on the step.
  const auto entropy = [](const json& r) {
    return r.at("layers").at(1).at("effective").at("mean_entropy").get<double>();
  };
  const json at_step = report_at(300), at_zero = report_at(0);
  CHECK(std::abs(entropy(at_step) - entropy(at_zero)) > 1e-4);  // the control: the step matters
  CHECK(entropy(got) == Approx(entropy(at_step)).epsilon(1e-9).margin(0));
}
