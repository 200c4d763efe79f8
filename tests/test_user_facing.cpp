// What a user sees: help that helps, an interrupt that obeys, a metrics.jsonl that says what a
// resume did and holds each step once, the README's --procs command working as written, and
// logs without colour codes when piped.
#include <signal.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/config.h"
#include "core/fs.h"
#include "test_dist_util.h"
#include "test_run_util.h"
#include "test_util.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

using namespace tda;
using tda::dist_test::slurp;

namespace {

std::string tiny_softmax() {
  return source_dir() + "/configs/tiny/softmax.json";
}

std::vector<json> records(const std::string& path) {
  std::vector<json> r;
  std::ifstream f(path);
  for (std::string l; std::getline(f, l);) r.push_back(json::parse(l));
  return r;
}

}  // namespace

TEST_CASE("tda bench --help prints the benchmarks and exits 0", "[cli]") {
  std::string out;
  CHECK(run_tda("bench --help", &out) == 0);
  CHECK(out.find("train") != std::string::npos);
  CHECK(out.find("attention") != std::string::npos);
  CHECK(out.find("checkpoint") != std::string::npos);
  CHECK(out.find("dryrun") != std::string::npos);
  CHECK(out.find("unknown") == std::string::npos);
  CHECK(run_tda("bench -h", &out) == 0);
  CHECK(run_tda("bench nope", &out) != 0);
  CHECK(out ==
        "error: bench: unknown benchmark 'nope' (train, attention, checkpoint, dryrun; tda bench "
        "--help)\n");
}

TEST_CASE("a second interrupt exits at once and non-zero and says so", "[training]") {
  REQUIRE(path_exists(source_dir() + "/data/tinyshakespeare/tiny_shakespeare_train.bin"));
  // The first signal is sent 20 ms after step 1 is logged, so it lands inside step 2's first
  // micro-batch (of 4; each takes far longer than that); the second follows as soon as the first
  // has been announced, while that micro-batch still runs. Sent right after the model line
  // instead, the first signal often landed before step 1's first micro-batch under ASan, and the
  // run rightly stopped at once with nothing to save (exit 0, before a second signal could be
  // sent). Should the first still land outside a micro-batch, the run ends 0 on its own; that run
  // is not what this test is about, so it is tried again (a few times at most).
  for (int attempt = 0;; ++attempt) {
    TempDir dir;
    const std::string run = dir.path + "/run";
    TdaProcess p({"train", "--config", tiny_softmax(), "--out", run, "--set", "train.val_every=0",
                  "--set", "train.total_batch_tokens=4096", "--set", "train.log_every=1"},
                 dir.path + "/log.txt");
    REQUIRE(p.wait_for_log("step      1/", 120));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    p.kill_now(SIGINT);
    if (p.wait_for_log("interrupt again to exit at once", 60) && !p.poll()) p.kill_now(SIGINT);
    REQUIRE(p.wait_for(60));
    const std::string out = p.output();
    INFO(out);
    if (p.exited_with(0) && attempt < 3) continue;  // ended before a second signal: try again
    CHECK(p.exited_with(128 + SIGINT));
    CHECK(out.find("interrupt again to exit at once") != std::string::npos);
    CHECK(out.find("second interrupt: exiting now without a checkpoint") != std::string::npos);
    CHECK(latest_checkpoint(run).empty());  // it did not wait for the step to checkpoint
    break;
  }
}

TEST_CASE("resume: metrics.jsonl holds each step once after a resume record", "[training]") {
  REQUIRE(path_exists(source_dir() + "/data/tinyshakespeare/tiny_shakespeare_train.bin"));
  TempDir dir;
  Config cfg =
      load_config(tiny_softmax(), {"train.max_steps=5", "train.val_every=2", "train.val_batches=1",
                                   "train.micro_batch=2", "train.total_batch_tokens=256",
                                   "train.checkpoint_every=2", "train.keep_checkpoints=5"});
  {
    TrainOptions to;
    to.out_dir = dir.path;
    Trainer t(cfg, to);
    REQUIRE(t.run() == 0);  // steps 1..5, val at 0, 2, 4 and 5, checkpoints 2, 4 and 5
  }
  const std::vector<json> first = records(dir.path + "/metrics.jsonl");
  // As if killed after step 5 was logged but before its checkpoint and the one at 4 landed.
  remove_tree(dir.path + "/checkpoints/" + checkpoint_dir_name(5));
  remove_tree(dir.path + "/checkpoints/" + checkpoint_dir_name(4));
  {
    TrainOptions to;
    to.out_dir = dir.path;
    to.resume = "auto";
    Trainer t(cfg, to);
    REQUIRE(t.step() == 2);
    REQUIRE(t.run() == 0);
  }
  const std::vector<json> now = records(dir.path + "/metrics.jsonl");
  std::map<std::pair<std::string, long>, int> seen;
  long last_train = 0;
  int resumes = 0;
  for (const auto& r : now) {
    INFO(r.dump());
    const std::string type = r.at("type");
    const long step = r.at("step");
    CHECK(++seen[{type, step}] == 1);  // no (type, step) twice
    if (type == "train") {
      CHECK(step == last_train + 1);  // in order, none missing
      last_train = step;
    }
    if (type == "resume") {
      ++resumes;
      CHECK(step == 2);
      CHECK(r.at("checkpoint").get<std::string>().find(checkpoint_dir_name(2)) !=
            std::string::npos);
      CHECK(r.at("superseded") == 8);  // train 3-5, val 2, 4 and 5, checkpoints 4 and 5
    }
  }
  CHECK(resumes == 1);
  CHECK(last_train == 5);
  // The old run's records of steps 3..5 were moved, not lost; the replay is bit-exact, so the
  // same steps give the same losses.
  const std::vector<json> old = records(dir.path + "/metrics.superseded.jsonl");
  REQUIRE(old.size() == 8);
  for (const auto& o : old) {
    if (o.at("type") != "train") continue;
    for (const auto& f : first)
      if (f.at("type") == "train" && f.at("step") == o.at("step")) CHECK(f == o);
    for (const auto& r : now)
      if (r.at("type") == "train" && r.at("step") == o.at("step"))
        CHECK(r.at("loss").get<double>() == o.at("loss").get<double>());
  }
}

TEST_CASE("the README's --procs 2 command trains as written and piped logs carry no colour codes",
          "[dist][mpi][cli]") {
  REQUIRE_MPI_AND_DATA();
  const std::vector<char> readme = read_file_bytes(source_dir() + "/README.md");
  std::smatch m;
  const std::string text(readme.begin(), readme.end());
  const std::regex procs_line(R"(\./build/tda (train [^\n#]*--procs 2[^\n#]*))");
  REQUIRE(std::regex_search(text, m, procs_line));
  TempDir dir;
  std::string args = m[1].str();
  const auto k = args.find(" configs/");
  if (k != std::string::npos) args.replace(k, 1, " " + source_dir() + "/");
  std::string out;
  // run_tda pipes the output: spdlog must not colour it, on the launcher or on the ranks.
  const int rc =
      run_tda(args + " --steps 2 --out " + dir.path + "/run --set train.val_every=0", &out);
  INFO(args << "\n" << out);
  CHECK(rc == 0);
  CHECK(out.find('\033') == std::string::npos);
  CHECK(!latest_checkpoint(dir.path + "/run").empty());
  // A batch that does not split over the ranks: refused before any worker starts, with the
  // micro-batch that works, and no claim about checkpoints that were never written.
  const int bad = run_tda(
      "train --config " + tiny_softmax() + " --procs 2 --steps 1 --out " + dir.path + "/bad", &out);
  CHECK(bad != 0);
  CHECK(out ==
        "error: train.total_batch_tokens (1024) must be a multiple of micro_batch*seq_len*ranks "
        "(8*128*2 = 2048); --set train.micro_batch=4 keeps the batch of 1024 tokens\n");
}
