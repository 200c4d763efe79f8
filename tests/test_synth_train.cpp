// Training on a synthetic task: the trainer's loss, gradient and validation loss are means over
// the answers of the whole step (every micro-batch; every rank), not over all B*T targets; two
// ranks train like one with twice the batch; and `tda synth` trains each kind it is given and
// writes its accuracy at every length, with and without NTK-aware RoPE.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "backend/cpu/cpu_ops.h"
#include "core/config.h"
#include "data/synthetic.h"
#include "test_dist_util.h"
#include "test_util.h"
#include "train/trainer.h"

using namespace tda;

namespace {

// The synth config with a small model step: 2 micro-batches of 4 x 64 per step.
Config synth_config(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> sets = {"train.micro_batch=4", "train.total_batch_tokens=512",
                                   "train.val_every=0", "train.max_steps=3",
                                   "optim.warmup_steps=1"};
  sets.insert(sets.end(), extra.begin(), extra.end());
  return load_config(source_dir() + "/configs/synth/mqar.json", sets);
}

}  // namespace

TEST_CASE("synthetic training: the step's loss and gradient are means over its answers",
          "[training][synthetic]") {
  TempDir dir;
  const Config cfg = synth_config();
  TrainOptions to;
  to.out_dir = dir.path;
  Trainer trainer(cfg, to);
  REQUIRE(trainer.grad_accum_steps() == 2);
  const StepMetrics sm = trainer.train_step();

  // The same step by hand: the same initial weights and the same two micro-batches, each
  // target's gradient scaled by 1 / (the answers of both).
  CpuOps ops;
  GPT2 ref(cfg.model, cfg.attention, ops);
  ref.init_weights(cfg.train.seed);
  const int B = 4, T = cfg.model.seq_len;
  ref.set_batch(B, T);
  SyntheticLoader loader(cfg.data.synthetic, SyntheticSplit::kTrain, B, T, cfg.train.seed);
  std::vector<int32_t> in(size_t(2) * B * T), tg(in.size());
  loader.next(in.data(), tg.data());
  loader.next(in.data() + B * T, tg.data() + B * T);
  const long answers = long(tg.size()) - std::count(tg.begin(), tg.end(), kIgnoreTarget);
  REQUIRE(answers == 2 * B * 8);  // 8 queries per sequence, out of 2*B*T = 512 targets
  ref.zero_grad();
  double sum = 0;
  for (int m = 0; m < 2; ++m) {
    ref.forward(in.data() + m * B * T, tg.data() + m * B * T, true, float(1.0 / answers));
    sum += ref.loss_sum();
    ref.backward();
  }
  CHECK(sm.loss == Approx(sum / answers).epsilon(1e-12));
  // Near ln(256) at initialisation: a mean over all 512 targets would be 16x smaller.
  CHECK(std::abs(sm.loss - std::log(256.0)) < 0.5);
  const double norm = std::sqrt(ops.sum_squares(ref.grads(), ref.flat_size()));
  CHECK(sm.grad_norm == Approx(norm).epsilon(1e-5));  // the same sums in the same order

  // Validation: the mean over the answers of val_batches batches of the validation stream.
  SyntheticLoader val(cfg.data.synthetic, SyntheticSplit::kVal, B, T, cfg.train.seed);
  trainer.model().set_batch(B, T);
  double vsum = 0;
  long vcount = 0;
  for (int i = 0; i < cfg.train.val_batches; ++i) {
    val.next(in.data(), tg.data());
    trainer.model().forward(in.data(), tg.data(), false, 0.f);
    vsum += trainer.model().loss_sum();
    vcount += trainer.model().counted_targets();
  }
  CHECK(vcount == cfg.train.val_batches * B * 8);
  CHECK(trainer.evaluate() == Approx(vsum / double(vcount)).epsilon(1e-12));
}

TEST_CASE("synthetic training: a resume continues the task's stream bit for bit",
          "[training][synthetic]") {
  TempDir a, b;
  const Config cfg = synth_config({"train.max_steps=4"});
  std::vector<float> straight;
  double straight_loss = 0;
  {
    TrainOptions to;
    to.out_dir = a.path;
    Trainer t(cfg, to);
    for (int i = 0; i < 4; ++i) straight_loss = t.train_step().loss;
    straight = t.model().params_to_host();
  }
  {
    TrainOptions to;
    to.out_dir = b.path;
    to.max_steps_override = 2;
    Trainer t(cfg, to);
    REQUIRE(t.run() == 0);  // the final checkpoint at step 2 holds the loader's position
  }
  TrainOptions to;
  to.out_dir = b.path;
  to.resume = "auto";
  Trainer t(cfg, to);
  REQUIRE(t.step() == 2);
  double resumed_loss = 0;
  for (int i = 0; i < 2; ++i) resumed_loss = t.train_step().loss;
  CHECK(resumed_loss == straight_loss);
  CHECK(t.model().params_to_host() == straight);  // the same batches: every parameter, bit for bit
}

TEST_CASE("synthetic training: two ranks x B train like one rank x 2B", "[dist][mpi]") {
  if (!dist_test::have_mpirun()) TDA_SKIP("mpirun not found (apt-get install openmpi-bin)");
  TempDir one, two;
  const std::string args = "train --config " + source_dir() +
                           "/configs/synth/mqar.json --set train.total_batch_tokens=512 --set "
                           "train.val_every=0 --set train.max_steps=4 --set optim.warmup_steps=2";
  dist_test::run_ok(args + " --out " + one.path + " --set train.micro_batch=8");
  dist_test::run_ok(args + " --out " + two.path + " --set train.micro_batch=4 --procs 2");
  const auto ref = dist_test::losses(one.path);
  REQUIRE(ref.size() == 4);
  dist_test::check_losses_close(dist_test::losses(two.path), ref);
  dist_test::check_params_close(dist_test::params(two.path), dist_test::params(one.path));
}

TEST_CASE("tda synth: trains the kinds it is given and scores them at every length",
          "[training][synthetic][cli]") {
  TempDir dir;
  const std::string common = "synth --config " + source_dir() + "/configs/synth/mqar.json --out " +
                             dir.path +
                             " --multiples 1,2 --sequences 3 --set train.max_steps=2 --set "
                             "train.val_every=0 --set train.micro_batch=8";
  std::string out;
  const int rc = run_tda(common + " --kinds softmax,tda", &out);
  INFO(out);
  REQUIRE(rc == 0);
  std::ifstream f(dir.path + "/results.json");
  const json r = json::parse(f);
  REQUIRE(r.at("kinds").size() == 2);
  for (const auto& k : r.at("kinds")) {
    INFO(k.dump());
    // 1x once, 2x with the trained RoPE and with NTK scaling by 2
    REQUIRE(k.at("evals").size() == 3);
    const auto& e = k.at("evals");
    CHECK(e[0].at("length") == 64);
    CHECK(e[1].at("length") == 128);
    CHECK(e[1].at("rope") == "trained");
    CHECK(e[2].at("rope") == "ntk");
    CHECK(e[2].at("ntk_factor") == 2.0);
    for (const auto& x : e) {
      CHECK(x.at("answers") == 3 * 8);  // 3 sequences of 8 answers
      CHECK(x.at("accuracy").get<double>() >= 0.0);
      CHECK(x.at("accuracy").get<double>() <= 1.0);
    }
    CHECK(k.at("steps") == 2);
  }
  // The plotting script reads it (where the venv's Python with matplotlib is).
  const std::string py = source_dir() + "/.venv/bin/python";
  if (std::filesystem::exists(py)) {
    CHECK(run_command(py + " " + source_dir() + "/scripts/plot_synth.py " + dir.path +
                          "/results.json -o " + dir.path + "/acc.png",
                      &out) == 0);
    CHECK(std::filesystem::exists(dir.path + "/acc.png"));
    CHECK(out.find("softmax") != std::string::npos);
  }
  // A kind that is not registered, and a config without a task, are one-line errors.
  CHECK(run_tda(common + " --kinds softmax,nope", &out) != 0);
  CHECK(out.find("'nope', which is not a registered kind") != std::string::npos);
  CHECK(run_tda("synth --config " + source_dir() + "/configs/synth/mqar.json --out " + dir.path +
                    "/bad --multiples 1,,2",
                &out) != 0);
  CHECK(out.find("synth: --multiples item '' is not a positive integer") != std::string::npos);
  CHECK(run_tda("synth --config " + source_dir() + "/configs/tiny/softmax.json", &out) != 0);
  CHECK(out.find("sets no data.synthetic.task") != std::string::npos);
}
