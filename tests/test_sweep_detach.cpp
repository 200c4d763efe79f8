// A study that survives its terminal (docs/sweeps.md, "Long studies"): `tda sweep --detach`
// started from a shell whose whole process group is then killed (a closed terminal, a lost ssh
// session) finishes every run, each step trained once, and `tda sweep status` follows it; a
// sweep's evaluations go one per GPU of the node (a fake GPU count: TDA_SWEEP_GPUS).
#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <numeric>

#include "sweep/gpus.h"
#include "test_report_util.h"
#include "test_run_util.h"

using namespace tda;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

using Ids = std::vector<std::string>;

// Two byte-corpus runs of `steps` steps, the validation-loss evaluation only, on `device`.
json spec_for(const std::vector<std::string>& corpus, int steps, const std::string& device,
              const json& more_evals = json::object()) {
  json set = {{"model.seq_len", 64},         {"train.total_batch_tokens", 128},
              {"train.micro_batch", 2},      {"train.max_steps", steps},
              {"train.val_every", 0},        {"train.checkpoint_every", 10},
              {"train.log_every", 10},       {"model.vocab_size", 256},
              {"model.real_vocab_size", 256}};
  for (size_t i = 1; i < corpus.size(); i += 2) {  // "--set", "k=v" pairs: the data paths
    const auto eq = corpus[i].find('=');
    if (corpus[i].compare(0, 5, "data.") == 0)
      set[corpus[i].substr(0, eq)] = corpus[i].substr(eq + 1);
  }
  const json off = {{"enabled", false}};
  json ev = {{"device", device}, {"val", {{"sequences", 2}}},
             {"mc", off},        {"diag", off},
             {"passkey", off},   {"scrolls", off}};
  for (const auto& [k, v] : more_evals.items()) ev[k] = v;
  return {{"name", "survivor"},
          {"config", source_dir() + "/configs/tiny/base.json"},
          {"set", set},
          {"runs", {{{"name", "a"}}, {{"name", "b"}, {"set", {{"attention.kind", "tda"}}}}}},
          {"eval", ev}};
}

std::vector<int> train_steps(const std::string& metrics) {
  std::vector<int> steps;
  std::istringstream in(slurp(metrics));
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line, nullptr, false);
    if (j.is_object() && j.value("type", "") == "train") steps.push_back(j["step"]);
  }
  return steps;
}

std::string status_of(const std::string& sw) {
  std::string out;
  run_tda("sweep status " + sw, &out);
  return out;
}

}  // namespace

TEST_CASE("sweep GPUs: each slot owns its share of the node, evaluations one per GPU", "[sweep]") {
  const Ids eight = {"0", "1", "2", "3", "4", "5", "6", "7"};
  // One run at a time on 8 GPUs: its evaluations use all 8, whatever its training uses.
  CHECK(slot_gpus(eight, 0, 1, 8) == eight);
  CHECK(slot_gpus(eight, 0, 1, 0) == eight);
  // Two at a time: halves; four single-GPU runs: pairs.
  CHECK(slot_gpus(eight, 1, 2, 4) == Ids{"4", "5", "6", "7"});
  CHECK(slot_gpus(eight, 3, 4, 1) == Ids{"6", "7"});
  // More slots than GPUs share them; a CPU-only node has none (one evaluation at a time).
  CHECK(slot_gpus({"0"}, 1, 2, 0) == Ids{"0"});
  CHECK(slot_gpus({}, 0, 1, 8).empty());
  // The count comes from TDA_SWEEP_GPUS (tests), within the sweep's CUDA_VISIBLE_DEVICES.
  {
    ScopedEnv fake("TDA_SWEEP_GPUS", "3"), visible("CUDA_VISIBLE_DEVICES", nullptr);
    CHECK(node_gpus() == Ids{"0", "1", "2"});
  }
  {
    ScopedEnv fake("TDA_SWEEP_GPUS", "2"), visible("CUDA_VISIBLE_DEVICES", "4,6,7");
    CHECK(node_gpus() == Ids{"4", "6"});
    CHECK(slot_gpus(node_gpus(), 0, 1, 1) == Ids{"4", "6"});
  }
  {
    ScopedEnv fake("TDA_SWEEP_GPUS", nullptr), visible("CUDA_VISIBLE_DEVICES", "5,3");
    CHECK(node_gpus() == Ids{"5", "3"});
  }
  ScopedEnv bad("TDA_SWEEP_GPUS", "two");
  CHECK_THROWS_WITH(node_gpus(), Catch::Contains("TDA_SWEEP_GPUS must be a GPU count"));
}

TEST_CASE("tda sweep: a run's GPU evaluations run side by side, one per GPU", "[sweep]") {
  TempDir dir;
  const std::string sw = dir.path + "/sw";
  // val and the two diagnostics on the emulated GPU, on a node of two (fake) GPUs.
  const json diag = {{"enabled", true}, {"sequences", 1}, {"long_factor", 1}, {"untrained", true}};
  json spec = spec_for(byte_corpus(dir.path), 2, "cuda", {{"diag", diag}});
  spec["runs"] = {{{"name", "a"}}};
  write_text(dir.path + "/s.json", spec.dump(1));
  TdaProcess p({"sweep", dir.path + "/s.json", "--out", sw}, dir.path + "/log.txt",
               {"TDA_SWEEP_GPUS=2"});
  REQUIRE(p.wait_for(120));
  INFO(p.output());
  REQUIRE(p.exited_with(0));
  CHECK(p.output().find("each run's evaluations 2 at once, one per GPU") != std::string::npos);
  const std::string cmds = slurp(sw + "/a/eval.log");
  INFO(cmds);
  // The first two start together, one on each GPU; each writes its own log.
  CHECK(cmds.find("$ CUDA_VISIBLE_DEVICES=0 tda eval val") != std::string::npos);
  CHECK(cmds.find("$ CUDA_VISIBLE_DEVICES=1 tda diag") != std::string::npos);
  for (const std::string e : {"val", "diag", "diag_init"}) {
    CHECK(fs::exists(sw + "/a/eval/" + e + ".json"));
    CHECK(fs::exists(sw + "/a/eval/" + e + ".log"));
  }
  CHECK(json::parse(slurp(sw + "/status.json"))["runs"]["a"]["state"] == "done");
}

TEST_CASE("tda sweep --detach: the study survives its shell's process group being killed",
          "[sweep]") {
  TempDir dir;
  const std::string sw = dir.path + "/sw";
  const int steps = 40;
  write_text(dir.path + "/s.json", spec_for(byte_corpus(dir.path), steps, "cpu").dump(1));
  // A terminal's shell: a session of its own, the sweep started from it, then the shell waits.
  const std::string cmd = std::string(TDA_BINARY) + " sweep " + dir.path + "/s.json --out " + sw +
                          " --detach > " + dir.path + "/detach.txt 2>&1; sleep 600";
  const pid_t shell = ::fork();
  if (shell == 0) {
    ::setsid();
    ::execl("/bin/bash", "bash", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto waited = [](const std::function<bool()>& done, double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!done()) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return true;
  };
  const bool detached = waited(
      [&] { return slurp(dir.path + "/detach.txt").find("status:") != std::string::npos; }, 30);
  const std::string before = status_of(sw);
  // A second sweep into the same directory is refused while this one runs.
  std::string second;
  const int second_rc = run_tda("sweep " + dir.path + "/s.json --out " + sw + " --detach", &second);
  // The terminal closes: hang-up, then the whole group killed.
  ::kill(-shell, SIGHUP);
  ::kill(-shell, SIGKILL);
  int st = 0;
  ::waitpid(shell, &st, 0);
  INFO(slurp(dir.path + "/detach.txt"));
  REQUIRE(detached);
  INFO(before);
  CHECK(before.find("sweep process: running") != std::string::npos);
  CHECK(before.find("2 done") == std::string::npos);  // killed mid-study
  CHECK(second_rc != 0);
  CHECK(second.find("a sweep already runs in " + sw) != std::string::npos);

  std::string now;
  const bool finished = waited(
      [&] {
        now = status_of(sw);
        return now.find("sweep process: not running") != std::string::npos;
      },
      90);
  INFO(now);
  INFO(slurp(sw + "/sweep.out"));
  REQUIRE(finished);
  CHECK(now.find("sweep survivor in " + sw + ": 2 done, 0 running, 0 failed, 0 pending") !=
        std::string::npos);
  std::vector<int> all(static_cast<size_t>(steps));
  std::iota(all.begin(), all.end(), 1);
  for (const std::string run : {"a", "b"}) {
    INFO(run);
    CHECK(train_steps(sw + "/" + run + "/metrics.jsonl") == all);
    CHECK(fs::exists(sw + "/" + run + "/eval/val.json"));
  }
  CHECK(slurp(sw + "/sweep.log").find("finished") != std::string::npos);
}

TEST_CASE("tda sweep status: states and ETA of a sweep directory", "[sweep]") {
  TempDir dir;
  const std::string sw = dir.path + "/sw";
  fs::create_directories(sw + "/b");
  write_text(sw + "/sweep.json", json({{"name", "s"},
                                       {"runs",
                                        {{{"name", "a"}, {"dir", sw + "/a"}, {"max_steps", 100}},
                                         {{"name", "b"}, {"dir", sw + "/b"}, {"max_steps", 100}},
                                         {{"name", "c"}, {"dir", sw + "/c"}, {"max_steps", 100}},
                                         {{"name", "d"}, {"dir", sw + "/d"}, {"max_steps", 100}}}}})
                                     .dump());
  write_text(
      sw + "/status.json",
      json({{"runs",
             {{"a", {{"state", "done"}, {"evals", {{"val", "done"}, {"mc_piqa", "skipped"}}}}},
              {"b", {{"state", "training"}, {"step", 10}}},
              {"c", {{"state", "failed"}, {"error", "tda train: out of memory"}}}}}})
          .dump());
  write_text(sw + "/b/metrics.jsonl", "{\"type\":\"train\",\"step\":40,\"ms\":2000}\n");
  const std::string s = status_of(sw);
  INFO(s);
  // No sweep process holds the directory: b is reported stopped where it was, with its ETA.
  CHECK(s.find("sweep s in " + sw + ": 1 done, 0 running, 1 failed, 1 pending, 1 stopped") !=
        std::string::npos);
  CHECK(s.find("a  done (100 steps; evaluations: 1 done, 1 skipped)") != std::string::npos);
  CHECK(s.find("b  stopped (training) at step 40/100, 2.00 s/step, ETA 2m00s") !=
        std::string::npos);
  CHECK(s.find("c  failed: tda train: out of memory") != std::string::npos);
  CHECK(s.find("d  pending") != std::string::npos);
  CHECK(s.find("sweep process: not running (the same tda sweep command resumes it)") !=
        std::string::npos);
  std::string out;
  CHECK(run_tda("sweep status " + dir.path + "/nothing", &out) != 0);
}
