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
#include "core/fs.h"
#include "data/synthetic.h"
#include "test_dist_util.h"
#include "test_util.h"
#include "train/trainer.h"

using namespace tda;

namespace {

// The synth config with a small model step: 2 micro-batches of 4 x 32 per step.
Config synth_config(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> sets = {"train.micro_batch=4", "train.total_batch_tokens=256",
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
  ref.init_weights(cfg.train.seed, cfg.train.init_scheme);
  const int B = 4, T = cfg.model.seq_len;
  ref.set_batch(B, T);
  SyntheticLoader loader(cfg.data.synthetic, SyntheticSplit::kTrain, B, T, cfg.train.seed);
  std::vector<int32_t> in(size_t(2) * B * T), tg(in.size());
  loader.next(in.data(), tg.data());
  loader.next(in.data() + B * T, tg.data() + B * T);
  const long answers = long(tg.size()) - std::count(tg.begin(), tg.end(), kIgnoreTarget);
  REQUIRE(answers == 2 * B * 4);  // 4 queries per sequence, out of 2*B*T = 256 targets
  ref.zero_grad();
  double sum = 0;
  for (int m = 0; m < 2; ++m) {
    ref.forward(in.data() + m * B * T, tg.data() + m * B * T, true, float(1.0 / answers));
    sum += ref.loss_sum();
    ref.backward();
  }
  CHECK(sm.loss == Approx(sum / answers).epsilon(1e-12));
  // Near ln(64) at initialisation: a mean over all 256 targets would be 8x smaller.
  CHECK(std::abs(sm.loss - std::log(64.0)) < 0.5);
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
  CHECK(vcount == cfg.train.val_batches * B * 4);
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
  const int rc = run_tda(common + " --kinds softmax,tda --seeds 1,2", &out);
  INFO(out);
  REQUIRE(rc == 0);
  std::ifstream f(dir.path + "/results.json");
  const json r = json::parse(f);
  REQUIRE(r.at("kinds").size() == 2);
  CHECK(r.at("seeds") == json::array({1, 2}));
  for (const auto& k : r.at("kinds")) {
    INFO(k.dump());
    REQUIRE(k.at("runs").size() == 2);
    for (size_t s = 0; s < 2; ++s) {
      const auto& run = k.at("runs")[s];
      CHECK(run.at("seed") == s + 1);
      CHECK(run.at("steps") == 2);
      // every run is its own training run, with its own seed
      const std::string run_dir =
          dir.path + "/" + k.at("kind").get<std::string>() + "/seed" + std::to_string(s + 1);
      const json cfg = json::parse(std::ifstream(run_dir + "/config.json"));
      CHECK(cfg.at("train").at("seed") == s + 1);
      // 1x once, 2x with the trained RoPE and with NTK scaling by 2
      REQUIRE(run.at("evals").size() == 3);
      const auto& e = run.at("evals");
      CHECK(e[0].at("length") == 32);
      CHECK(e[1].at("length") == 64);
      CHECK(e[1].at("rope") == "trained");
      CHECK(e[2].at("rope") == "ntk");
      CHECK(e[2].at("ntk_factor") == 2.0);
      for (const auto& x : e) CHECK(x.at("answers") == 3 * 4);  // 3 sequences of 4 answers
      // Diagnostics at 1x and the longest multiple, on the task's test sequences.
      REQUIRE(run.at("diag").size() == 2);
      CHECK(run.at("diag")[0].at("length") == 32);
      CHECK(run.at("diag")[1].at("length") == 64);
      if (k.at("kind") == "softmax")  // dense: every causal key survives, (T + 1) / 2 per row
        for (const auto& d : run.at("diag")) {
          CHECK(d.at("sparsity") == 0.0);
          CHECK(d.at("mean_survivors").get<double>() ==
                Approx((d.at("length").get<double>() + 1) / 2));
        }
    }
    const double z1 = k.at("runs")[0].at("diag")[1].at("gsink0");
    const double z2 = k.at("runs")[1].at("diag")[1].at("gsink0");
    CHECK(k.at("diag")[1].at("gsink0").get<double>() == Approx((z1 + z2) / 2));
    // Over the seeds: the mean, spread and range of the runs' accuracies at each length.
    REQUIRE(k.at("evals").size() == 3);
    for (size_t i = 0; i < 3; ++i) {
      const double a = k.at("runs")[0].at("evals")[i].at("accuracy");
      const double b = k.at("runs")[1].at("evals")[i].at("accuracy");
      const auto& e = k.at("evals")[i];
      CHECK(e.at("seeds") == 2);
      CHECK(e.at("accuracy").get<double>() == Approx((a + b) / 2));
      CHECK(e.at("accuracy_min").get<double>() == std::min(a, b));
      CHECK(e.at("accuracy_max").get<double>() == std::max(a, b));
      CHECK(e.at("accuracy_sd").get<double>() == Approx(std::abs(a - b) / std::sqrt(2.0)));
    }
  }
  // The two seeds trained different models: their first runs' weights differ.
  CHECK(read_file_bytes(dir.path + "/softmax/seed1/checkpoints/step_00000002/model.safetensors") !=
        read_file_bytes(dir.path + "/softmax/seed2/checkpoints/step_00000002/model.safetensors"));
  std::string header;
  std::getline(std::ifstream(dir.path + "/results.csv"), header);
  CHECK(header.rfind("kind,seed,", 0) == 0);
  // The plotting script reads it (where the venv's Python with matplotlib is).
  const std::string py = source_dir() + "/.venv/bin/python";
  if (std::filesystem::exists(py)) {
    CHECK(run_command(py + " " + source_dir() + "/scripts/plot_synth.py " + dir.path +
                          "/results.json -o " + dir.path + "/acc.png",
                      &out) == 0);
    CHECK(std::filesystem::exists(dir.path + "/acc.png"));
    CHECK(out.find("softmax") != std::string::npos);
  }
  // tda report on the directory writes the table: a row per kind, a column per length.
  REQUIRE(run_tda("report " + dir.path, &out) == 0);
  const std::vector<char> md = read_file_bytes(dir.path + "/report/report.md");
  const std::string report(md.begin(), md.end());
  CHECK(report.find("| kind | val loss | train s | 32 | 64 | 64n |") != std::string::npos);
  CHECK(report.find("| Softmax | ") != std::string::npos);
  CHECK(report.find("| TDA | ") != std::string::npos);
  CHECK(report.find("| kind | zeros % at 32 | gSinkRatio at 32 | survivors/row at 32 |") !=
        std::string::npos);
  CHECK(std::filesystem::exists(dir.path + "/report/synth_" +
                                std::filesystem::path(dir.path).filename().string() + ".csv"));
  // A kind that is not registered, and a config without a task, are one-line errors.
  CHECK(run_tda(common + " --kinds softmax,nope", &out) != 0);
  CHECK(out.find("'nope', which is not a registered kind") != std::string::npos);
  CHECK(run_tda("synth --config " + source_dir() + "/configs/synth/mqar.json --out " + dir.path +
                    "/bad --multiples 1,,2",
                &out) != 0);
  CHECK(out.find("synth: --multiples item '' is not a positive integer") != std::string::npos);
  CHECK(run_tda(common + " --seeds 1,x", &out) != 0);
  CHECK(out.find("synth: --seeds item 'x' is not a positive integer") != std::string::npos);
  CHECK(run_tda("synth --config " + source_dir() + "/configs/tiny/softmax.json", &out) != 0);
  CHECK(out.find("sets no data.synthetic.task") != std::string::npos);
}

TEST_CASE("tda synth: an interrupt stops the command, not only the run it hits",
          "[training][synthetic][cli]") {
  TempDir dir, logdir;
  const std::string log = logdir.path + "/log.txt";
  const pid_t pid = dist_test::spawn_tda("synth --config " + source_dir() +
                                             "/configs/synth/mqar.json --out " + dir.path +
                                             " --kinds softmax,tda --set train.max_steps=100000 "
                                             "--set train.val_every=0 --set train.log_every=1",
                                         log);
  REQUIRE(dist_test::wait_for(pid, dir.path + "/softmax/seed1337/metrics.jsonl"));
  usleep(300000);
  REQUIRE(kill(pid, SIGINT) == 0);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::vector<char> bytes = read_file_bytes(log);
  const std::string text(bytes.begin(), bytes.end());
  INFO(text);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) != 0);
  CHECK(text.find("synth: interrupted while training softmax (seed 1337) at step") !=
        std::string::npos);
  CHECK(!std::filesystem::exists(dir.path + "/tda"));  // the next kind never started
  CHECK(std::filesystem::exists(dir.path + "/softmax/seed1337/checkpoints"));
}
