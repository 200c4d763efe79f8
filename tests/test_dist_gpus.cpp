// `tda train --gpus N` in the emulated build: the launcher forks N workers itself (no mpirun),
// they meet through the NCCL stand-in (distributed/nccl_emu/) and train data-parallel. The tiny
// config keeps train.device=cpu: under the emulator "device" buffers are host memory, so the
// stand-in reduces the CPU trainer's buffers (the real build refuses that combination). What is
// checked is the GPU launch path: id hand-over, rank environment, NCCL collectives in the trainer
// (all-reduce in buckets, ZeRO-1 reduce-scatter / all-gather), failure and signal handling.
// Tolerances: test_dist_util.h.
#ifndef TDA_CUDA_EMU
#define TDA_CUDA_EMU 1
#endif
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <filesystem>

#include "distributed/nccl_communicator.h"
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

namespace {
int error_lines(const std::string& out) {
  int n = 0;
  for (size_t p = out.find("error:"); p != std::string::npos; p = out.find("error:", p + 1)) ++n;
  return n;
}
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

// Rank 1 stops for good when it issues its 6th collective (the stand-in's fault injection,
// distributed/nccl_emu/nccl.h), in the first steps of training (about 3 collectives per step).
TEST_CASE("a worker of tda train --gpus 2 that hangs: the other times out, one error line",
          "[dist][nccl]") {
  REQUIRE(data_present());
  TempDir dir, logdir;
  const std::string log = logdir.path + "/log.txt";
  ScopedEnv fault("TDA_NCCL_EMU_FAULT", "hang:1:6");
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = spawn_tda(gpus_args(dir.path, 2, 0, 500) + " --set dist.timeout_s=2 --gpus 2", log);
  int status = 0;
  waitpid(pid, &status, 0);
  const double took = seconds_since(t0);
  const std::string out = slurp(log);
  INFO(out << "\n(" << took << " s)");
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) != 0);
  // Rank 0 gave up after dist.timeout_s, the launcher stopped the hung rank 1 and reports rank
  // 0's reason (not "rank 1 died": the launcher killed it).
  CHECK(error_lines(out) == 1);
  CHECK(out.find("error: rank 0: nccl") != std::string::npos);
  CHECK(out.find(" failed: no progress in 2 s (dist.timeout_s): another rank hung, died or "
                 "stopped calling collectives; all 2 workers were stopped") != std::string::npos);
  CHECK(took < 30);  // start-up and a step, then 2 s: not the 600 s default, nor forever
}

// Two ranks started by hand with the id in the environment, as mpirun/srun would start them
// (no launcher to stop the survivor): rank 1 dies inside its 6th collective.
TEST_CASE("a rank whose peer dies mid-collective exits within the timeout with one line",
          "[dist][nccl]") {
  REQUIRE(data_present());
  TempDir dir, logdir;
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  const std::string hex = nccl_id_to_hex(id);
  ScopedEnv nccl_id(kEnvNcclId, hex.c_str()), world(kEnvWorld, "2"),
      fault("TDA_NCCL_EMU_FAULT", "die:1:6");
  std::vector<pid_t> pids;
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < 2; ++r) {
    const std::string rank = std::to_string(r);
    ScopedEnv rank_env(kEnvRank, rank.c_str()), local(kEnvLocalRank, rank.c_str());
    pids.push_back(
        spawn_tda(gpus_args(dir.path + "/r" + rank, 2, 0, 500) + " --set dist.timeout_s=60",
                  logdir.path + "/rank_" + rank + ".log"));
  }
  int st0 = 0, st1 = 0;
  waitpid(pids[0], &st0, 0);
  const double took = seconds_since(t0);
  waitpid(pids[1], &st1, 0);
  const std::string out = slurp(logdir.path + "/rank_0.log");
  INFO(out << "\n(" << took << " s)\n--- rank 1\n" << slurp(logdir.path + "/rank_1.log"));
  CHECK((WIFSIGNALED(st1) && WTERMSIG(st1) == SIGKILL));
  REQUIRE(WIFEXITED(st0));
  CHECK(WEXITSTATUS(st0) == 1);
  CHECK(error_lines(out) == 1);
  CHECK(out.find("error: rank 0: nccl") != std::string::npos);
  CHECK(out.find(" failed: remote process exited or the communicator was aborted (rank 1 (pid " +
                 std::to_string(pids[1]) + ") exited during a collective)\n") != std::string::npos);
  CHECK(took < 30);  // the stand-in sees the death within 100 ms; 60 s is the timeout
}
