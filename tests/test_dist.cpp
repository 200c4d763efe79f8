// Data-parallel training through MPI. Catch runs in one process, so every test starts `tda`
// (self-launched with --procs N, which runs the system mpirun) and compares what the runs leave
// on disk: metrics.jsonl losses and model.safetensors parameters.
// Tolerances: test_dist_util.h.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/config.h"
#include "core/fs.h"
#include "core/safetensors.h"
#include "test_dist_util.h"
#include "test_util.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

using namespace tda;
using namespace tda::dist_test;
namespace fs = std::filesystem;

TEST_CASE("two ranks x B train like one rank x 2B with and without ZeRO-1", "[dist][mpi]") {
  REQUIRE_MPI_AND_DATA();
  TempDir ref, z0, z1, z1again;
  run_ok(train_args(ref.path, 4, 0));
  run_ok(train_args(z0.path, 2, 0) + " --procs 2");
  run_ok(train_args(z1.path, 2, 1) + " --procs 2");
  const auto ref_loss = losses(ref.path);
  REQUIRE(ref_loss.size() == 4);
  check_losses_close(losses(z0.path), ref_loss);
  check_losses_close(losses(z1.path), ref_loss);
  const auto ref_params = params(ref.path);
  check_params_close(params(z0.path), ref_params);
  check_params_close(params(z1.path), ref_params);
  // Reductions run in a fixed order: the same run twice is bit-identical.
  run_ok(train_args(z1again.path, 2, 1) + " --procs 2");
  CHECK(losses(z1again.path) == losses(z1.path));
  CHECK(params(z1again.path) == params(z1.path));
}

TEST_CASE("three ranks with ZeRO-1 shards that cut through tensors", "[dist][mpi][slow]") {
  REQUIRE_MPI_AND_DATA();
  // 768 tokens = 6 sequences: 1 x 6 versus 3 ranks x 2. The parameter count is not a multiple
  // of 3 in general, so this also covers the padded shard path.
  TempDir ref, z1;
  const std::string big = " --set train.total_batch_tokens=768";
  run_ok(train_args(ref.path, 6, 0) + big);
  run_ok(train_args(z1.path, 2, 1) + big + " --procs 3");
  check_losses_close(losses(z1.path), losses(ref.path));
  check_params_close(params(z1.path), params(ref.path));
}

TEST_CASE("a 2-rank ZeRO-1 checkpoint resumes on 1 and on 2 ranks", "[dist][mpi]") {
  REQUIRE_MPI_AND_DATA();
  TempDir straight, half, on1, on2;
  run_ok(train_args(straight.path, 2, 1, 6) + " --procs 2");
  run_ok(train_args(half.path, 2, 1, 6) + " --procs 2 --steps 3");
  REQUIRE(latest_checkpoint(half.path).find("step_00000003") != std::string::npos);
  for (const auto& d : {on1.path, on2.path})
    fs::copy(half.path, d, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  // On one rank: micro-batch 4 keeps the global batch; moments come from the full state.
  run_ok(train_args(on1.path, 4, 0, 6) + " --resume auto");
  run_ok(train_args(on2.path, 2, 1, 6) + " --procs 2 --resume auto");
  const auto want = losses(straight.path);
  REQUIRE(want.size() == 6);
  // Same world size and sharding: bit-identical to the uninterrupted run.
  CHECK(losses(on2.path) == want);
  CHECK(params(on2.path) == params(straight.path));
  // One rank: the same training up to reduction-order noise.
  check_losses_close(losses(on1.path), want);
  check_params_close(params(on1.path), params(straight.path));
}

TEST_CASE("killing a worker ends a self-launched run with one error line", "[dist][mpi]") {
  REQUIRE_MPI_AND_DATA();
  TempDir dir, logdir;
  const std::string log = logdir.path + "/log.txt";
  // A checkpoint every step, so the kill is likely to land near or during a write.
  pid_t pid =
      spawn_tda(train_args(dir.path, 2, 1, 500) +
                    " --set train.checkpoint_every=1 --set train.keep_checkpoints=3 --procs 2",
                log);
  REQUIRE(wait_for(pid, dir.path + "/.workers/rank_1.pid", dir.path));
  int victim = std::stoi(slurp(dir.path + "/.workers/rank_1.pid"));
  REQUIRE(victim > 0);
  REQUIRE(kill(victim, SIGKILL) == 0);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string out = slurp(log);
  INFO(out);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) != 0);
  CHECK(out.find("error: worker rank 1 (pid " + std::to_string(victim) + ") died") !=
        std::string::npos);
  // mpirun's own multi-line banners are suppressed: the error is one line.
  size_t error_lines = 0;
  for (size_t p = out.find("error:"); p != std::string::npos; p = out.find("error:", p + 1))
    ++error_lines;
  CHECK(error_lines == 1);
  CHECK(!path_exists(dir.path + "/.workers"));
  // Every checkpoint left behind is complete and loads.
  Config cfg = load_config(source_dir() + "/configs/tiny/softmax.json",
                           {"train.micro_batch=2", "train.total_batch_tokens=512"});
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir.path + "/checkpoints")) {
    std::string name = e.path().filename().string();
    if (name.rfind("step_", 0) != 0) continue;  // a hidden .tmp dir is an unfinished write
    TempDir scratch;
    TrainOptions to;
    to.out_dir = scratch.path;
    to.resume = e.path().string();
    Trainer t(cfg, to);
    CHECK(t.step() >= 1);
    ++n;
  }
  CHECK(n >= 1);
}

TEST_CASE("SIGINT to a self-launched run checkpoints on every rank and exits 0", "[dist][mpi]") {
  REQUIRE_MPI_AND_DATA();
  TempDir dir, logdir;
  const std::string log = logdir.path + "/log.txt";
  pid_t pid = spawn_tda(train_args(dir.path, 2, 1, 500) + " --procs 2", log);
  REQUIRE(wait_for(pid, dir.path + "/metrics.jsonl"));
  REQUIRE(wait_for(pid, dir.path + "/.workers/rank_1.pid"));
  usleep(300000);
  REQUIRE(kill(pid, SIGINT) == 0);
  int status = 0;
  waitpid(pid, &status, 0);
  INFO(slurp(log));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  std::string ck = latest_checkpoint(dir.path);
  REQUIRE(!ck.empty());
  TrainState st = read_checkpoint_state(ck);
  CHECK(st.step >= 1);
  CHECK(st.step < 500);
}
