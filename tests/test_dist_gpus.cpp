// `tda train --gpus N` in the emulated build: the launcher forks N workers itself (no mpirun),
// they meet through the NCCL stand-in (dist/nccl_emu/) and train data-parallel. The tiny config
// keeps train.device=cpu: under the emulator "device" buffers are host memory, so the stand-in
// reduces the CPU trainer's buffers (the real build refuses that combination). What is checked
// is the GPU launch path: id hand-over, rank environment, NCCL collectives in the trainer
// (all-reduce in buckets, ZeRO-1 reduce-scatter / all-gather), failure and signal handling.
// Tolerances: test_dist_util.h.
#include <catch2/catch.hpp>
#include <cerrno>
#include <filesystem>

#include "test_dist_util.h"
#include "train/trainer.h"

using namespace tda;
using namespace tda::dist_test;
namespace fs = std::filesystem;

namespace {
// A smaller model than the MPI tests (d_model 32, T 32: ~2 s per run on 2 cores): 4 sequences
// of 32 tokens per step.
std::string gpus_args(const std::string& out, int micro_batch, int zero, int max_steps = 4) {
  return "train --config " + source_dir() + "/configs/tiny/softmax.json --out " + out +
         " --set model.d_model=32 --set model.seq_len=32 --set train.total_batch_tokens=128" +
         " --set train.micro_batch=" + std::to_string(micro_batch) +
         " --set train.val_every=0 --set train.max_steps=" + std::to_string(max_steps) +
         " --set optim.warmup_steps=2 --set dist.zero_stage=" + std::to_string(zero);
}
}  // namespace

TEST_CASE("gpus 2 x B with the NCCL stand-in train like 1 x 2B with ZeRO-1 on and off",
          "[dist][nccl]") {
  REQUIRE(data_present());
  TempDir ref, z0, z0_one_bucket, z1;
  run_ok(gpus_args(ref.path, 4, 0));
  // 0.25 MiB buckets: the ~1.7M gradients go out in 7 all-reduce calls.
  run_ok(gpus_args(z0.path, 2, 0) + " --set dist.bucket_mb=0.25 --gpus 2");
  run_ok(gpus_args(z0_one_bucket.path, 2, 0) + " --set dist.bucket_mb=0 --gpus 2");
  run_ok(gpus_args(z1.path, 2, 1) + " --gpus 2");
  const auto ref_loss = losses(ref.path);
  REQUIRE(ref_loss.size() == 4);
  check_losses_close(losses(z0.path), ref_loss);
  check_losses_close(losses(z1.path), ref_loss);
  const auto ref_params = params(ref.path);
  check_params_close(params(z0.path), ref_params);
  check_params_close(params(z1.path), ref_params);
  // Buckets change which elements go in which call, never how one element is summed (the
  // stand-in adds ranks in order): bit-identical to one bucket.
  CHECK(losses(z0.path) == losses(z0_one_bucket.path));
  CHECK(params(z0.path) == params(z0_one_bucket.path));
}

TEST_CASE("killing a worker of tda train --gpus 2 ends the run with one error line",
          "[dist][nccl]") {
  REQUIRE(data_present());
  TempDir dir, logdir;
  const std::string log = logdir.path + "/log.txt";
  pid_t pid =
      spawn_tda(gpus_args(dir.path, 2, 1, 500) +
                    " --set train.checkpoint_every=1 --set train.keep_checkpoints=3 --gpus 2",
                log);
  REQUIRE(wait_for(pid, dir.path + "/.workers/rank_1.pid", dir.path));
  REQUIRE(wait_for(pid, dir.path + "/.workers/rank_0.pid"));
  const int victim = std::stoi(slurp(dir.path + "/.workers/rank_1.pid"));
  const int survivor = std::stoi(slurp(dir.path + "/.workers/rank_0.pid"));
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
  size_t error_lines = 0;
  for (size_t p = out.find("error:"); p != std::string::npos; p = out.find("error:", p + 1))
    ++error_lines;
  CHECK(error_lines == 1);
  CHECK(!path_exists(dir.path + "/.workers"));
  // No worker outlives the run: the launcher killed rank 0 and reaped it.
  CHECK((kill(survivor, 0) != 0 && errno == ESRCH));
  // Every checkpoint left behind is complete and loads.
  Config cfg = load_config(source_dir() + "/configs/tiny/softmax.json",
                           {"model.d_model=32", "model.seq_len=32", "train.micro_batch=2",
                            "train.total_batch_tokens=128"});
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir.path + "/checkpoints")) {
    const std::string name = e.path().filename().string();
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

TEST_CASE("SIGINT to tda train --gpus 2 checkpoints and exits 0", "[dist][nccl]") {
  REQUIRE(data_present());
  TempDir dir, logdir;
  const std::string log = logdir.path + "/log.txt";
  pid_t pid = spawn_tda(gpus_args(dir.path, 2, 0, 500) + " --gpus 2", log);
  REQUIRE(wait_for(pid, dir.path + "/metrics.jsonl"));
  REQUIRE(kill(pid, SIGINT) == 0);
  int status = 0;
  waitpid(pid, &status, 0);
  INFO(slurp(log));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  const std::string ck = latest_checkpoint(dir.path);
  REQUIRE(!ck.empty());
  const TrainState st = read_checkpoint_state(ck);
  CHECK(st.step >= 1);
  CHECK(st.step < 500);
}

TEST_CASE("tda train --gpus refuses to run under mpirun and with --procs", "[dist][nccl]") {
  std::string out;
  const std::string cfg = "train --config " + source_dir() + "/configs/tiny/softmax.json";
  CHECK(run_tda(cfg + " --gpus 2 --procs 2", &out) != 0);
  CHECK(out.find("pick one") != std::string::npos);
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);  // as if started by mpirun
  const int rc = run_tda(cfg + " --gpus 2", &out);
  unsetenv("OMPI_COMM_WORLD_SIZE");
  CHECK(rc != 0);
  CHECK(out.find("--gpus starts its own workers") != std::string::npos);
}
