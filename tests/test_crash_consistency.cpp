// Crash consistency: a small training run is killed with SIGKILL many times, at random moments
// and at chosen points inside checkpoint writing and pruning (TDA_FAULT, core/fault.h), and
// resumed with --resume auto after each kill. After every kill each checkpoint directory on
// disk must load (checksums verified), leftovers must not pile up, and the final checkpoint
// must equal an uninterrupted run's byte for byte. Half the runs start with a twin on the same
// directory: the lock must let one of them write, never both.
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

#include "core/rng.h"
#include "core/safetensors.h"
#include "eval/loaded_model.h"
#include "test_run_util.h"
#include "train/checkpoint.h"

using namespace tda;
namespace fs = std::filesystem;

namespace {
constexpr int kSteps = 80;

// What a kill may leave in checkpoints/: complete step directories that load, and at most one
// unfinished write (.tmp) and one unfinished deletion (.trash); older leftovers must have been
// cleaned by the start-up of the run after them.
void check_checkpoints_dir(const std::string& run) {
  const fs::path root = fs::path(run) / "checkpoints";
  if (!fs::exists(root)) return;
  int tmp = 0, trash = 0;
  for (const auto& e : fs::directory_iterator(root)) {
    const std::string name = e.path().filename().string();
    INFO(e.path());
    if (name[0] == '.') {
      const bool is_tmp = name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0;
      tmp += is_tmp;
      trash += !is_tmp;
      continue;
    }
    REQUIRE(fs::exists(e.path() / "state.json"));
    LoadedModel lm = load_model_for_eval(e.path().string());  // verifies model.safetensors
    CHECK(lm.step == read_checkpoint_state(e.path().string()).step);
    SafetensorsFile(e.path().string() + "/optimizer.safetensors").verify_all();
  }
  CHECK(tmp <= 1);
  CHECK(trash <= 1);
}
}  // namespace

TEST_CASE(
    "crash consistency: kill -9 during training and checkpoint writes and pruning then exact "
    "resume",
    "[training][crash]") {
  TempDir d;
  std::vector<std::string> args = {"train",
                                   "--config",
                                   source_dir() + "/configs/tiny/softmax.json",
                                   "--set",
                                   "model.n_layer=1",
                                   "--set",
                                   "model.d_model=64",
                                   "--set",
                                   "model.n_head=1",
                                   "--set",
                                   "model.seq_len=32",
                                   "--set",
                                   "train.micro_batch=2",
                                   "--set",
                                   "train.total_batch_tokens=128",
                                   "--set",
                                   "train.max_steps=" + std::to_string(kSteps),
                                   "--set",
                                   "train.checkpoint_every=1",
                                   "--set",
                                   "train.keep_checkpoints=2",
                                   "--set",
                                   "train.val_every=7",
                                   "--set",
                                   "train.val_batches=1",
                                   "--set",
                                   "train.threads=1",
                                   "--set",
                                   "optim.warmup_steps=5",
                                   "--resume",
                                   "auto"};
  const auto data = byte_corpus(d.path);
  args.insert(args.end(), data.begin(), data.end());
  auto with_out = [&](const std::string& out) {
    auto a = args;
    a.insert(a.end(), {"--out", out});
    return a;
  };

  const auto t0 = std::chrono::steady_clock::now();
  {
    TdaProcess ref(with_out(d.path + "/ref"), d.path + "/ref.log");
    REQUIRE(ref.wait_for(120));
    INFO(ref.output());
    REQUIRE(ref.exited_with(0));
  }
  const double ref_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("ref %.3f s\n", ref_s);

  const std::vector<std::string> sites = {"ckpt.model",   "ckpt.optimizer", "ckpt.complete",
                                          "ckpt.renamed", "prune.renamed",  "prune.partial"};
  const std::string run = d.path + "/crash";
  Rng rng(20240520);
  int kills = 0, runs = 0, refused = 0;
  bool finished = false;
  // Kill until 40 kills or the run completes despite them; each kill lands at a random moment
  // (one run in three) or at the k-th pass (k = 1..3) of a point inside a checkpoint write/prune.
  // Every other run has a twin started with it on the same directory (a requeue overlapping the
  // old job): one of the two writes, the other must be refused by the run directory's lock, or
  // start after the first has died; never may both write.
  while (kills < 40 && !finished) {
    std::vector<std::string> env;
    double delay = -1;
    if (runs % 3 == 2)
      delay = rng.uniform_double() * 4 * ref_s / kSteps;  // start-up, or up to ~3 steps in
    else
      env.push_back("TDA_FAULT=" + sites[rng.below(sites.size())] + ":" +
                    std::to_string(1 + rng.below(3)));
    const bool twin = runs % 2 == 1;
    ++runs;
    std::vector<std::unique_ptr<TdaProcess>> ps;
    ps.push_back(std::make_unique<TdaProcess>(with_out(run), d.path + "/crash.log", env));
    if (twin) ps.push_back(std::make_unique<TdaProcess>(with_out(run), d.path + "/twin.log", env));
    if (delay >= 0) {  // whichever of the twins holds the run is killed
      std::this_thread::sleep_for(std::chrono::duration<double>(delay));
      for (auto& p : ps)
        if (!p->poll()) p->kill_now(SIGKILL);
    }
    for (auto& p : ps) {
      REQUIRE(p->wait_for(120));
      INFO("run " << runs << (twin ? " (twins) " : " ")
                  << (env.empty() ? "delay " + std::to_string(delay) : env[0]) << "\n"
                  << p->output());
      std::printf("run %d%s %s -> %s, latest %s\n", runs, twin ? " (twins)" : "",
                  env.empty() ? ("delay " + std::to_string(delay)).c_str() : env[0].c_str(),
                  p->killed()         ? "killed"
                  : p->exited_with(0) ? "exit 0"
                                      : "refused",
                  latest_checkpoint(run).c_str());
      if (p->killed()) {
        REQUIRE(WTERMSIG(p->status) == SIGKILL);
        ++kills;
      } else if (p->exited_with(0)) {
        finished = latest_checkpoint(run).find(checkpoint_dir_name(kSteps)) != std::string::npos;
      } else {
        REQUIRE(p->exited_with(1));
        REQUIRE(p->output().find("is in use by another tda train") != std::string::npos);
        ++refused;
      }
    }
    check_checkpoints_dir(run);
  }
  if (!finished) {
    TdaProcess p(with_out(run), d.path + "/crash.log");
    REQUIRE(p.wait_for(120));
    INFO(p.output());
    REQUIRE(p.exited_with(0));
  }
  WARN(kills << " SIGKILLs over " << runs << " runs, " << refused << " twins refused");
  CHECK(refused >= 1);  // the twins did overlap
  CHECK(kills >= 30);   // the run must not have outrun the kills
  // Nothing left over: exactly the newest keep_checkpoints=2 directories.
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(run + "/checkpoints"))
    left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  CHECK(left ==
        std::vector<std::string>{checkpoint_dir_name(kSteps - 1), checkpoint_dir_name(kSteps)});
  for (const std::string f : {"model.safetensors", "optimizer.safetensors"}) {
    INFO(f);
    CHECK(read_file_bytes(run + "/checkpoints/" + checkpoint_dir_name(kSteps) + "/" + f) ==
          read_file_bytes(d.path + "/ref/checkpoints/" + checkpoint_dir_name(kSteps) + "/" + f));
  }
}
