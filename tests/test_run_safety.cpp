// What a scheduler does to runs every day: a requeue that overlaps the old job or a second
// terminal on the same run directory (one writer: the other is refused), a resume with nothing
// intact to resume from (refused, never started over silently), a closed terminal (SIGHUP
// checkpoints like SIGTERM), a newest checkpoint with a file missing (fallback, nothing deleted),
// a start that fails (nothing left that blocks the corrected retry; bad data found before step 1).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/safetensors.h"
#include "eval/loaded_model.h"
#include "test_run_util.h"
#include "train/checkpoint.h"

using namespace tda;
namespace fs = std::filesystem;

namespace {

std::string host() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

// The `train` records' steps of metrics.jsonl, in file order.
std::vector<long> train_steps(const std::string& run) {
  std::vector<long> steps;
  std::ifstream f(run + "/metrics.jsonl");
  std::string line;
  while (std::getline(f, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.at("type") == "train") steps.push_back(j.at("step").get<long>());
  }
  return steps;
}

std::vector<long> one_to(long n) {
  std::vector<long> v;
  for (long i = 1; i <= n; ++i) v.push_back(i);
  return v;
}

// A run small enough that a step is a few milliseconds and a checkpoint ~100 KB.
const std::vector<std::string> kSmall = {
    "--set", "model.n_layer=1",          "--set", "model.d_model=64",
    "--set", "model.n_head=1",           "--set", "model.seq_len=32",
    "--set", "train.micro_batch=2",      "--set", "train.total_batch_tokens=128",
    "--set", "train.checkpoint_every=1", "--set", "train.keep_checkpoints=2",
    "--set", "train.threads=1",          "--set", "train.max_steps=100000",
    "--set", "train.log_every=1"};

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE(
    "run dir lock: a second trainer is refused at once naming the holder, the first's "
    "checkpoints stay exact",
    "[training][lock]") {
  SmallRun r;
  TdaProcess a(r.args("softmax", kSmall + std::vector<std::string>{"--resume", "auto"}),
               r.d.path + "/a.log");
  REQUIRE(a.wait_for_log("checkpoint " + r.run + "/checkpoints/step_00000003", 60));
  // A requeue that overlaps the running job: it used to resume from the same checkpoints and
  // write the same step directories (a model of one process beside the optimizer of the other).
  for (const std::vector<std::string>& how :
       {std::vector<std::string>{"--resume", "auto"}, std::vector<std::string>{"--overwrite"},
        std::vector<std::string>{},
        // The data-parallel launcher refuses before it starts any worker.
        std::vector<std::string>{"--procs", "2", "--resume", "auto"}}) {
    TdaProcess b(r.args("softmax", kSmall + how), r.d.path + "/b.log");
    REQUIRE(b.wait_for(30));
    INFO((how.empty() ? "fresh" : how[0]) << "\n" << b.output());
    CHECK(b.exited_with(1));
    const std::string out = b.output();
    CHECK(out.find("error: " + r.run + " is in use by another tda train (pid " +
                   std::to_string(a.pid) + " on host " + host() + ", lock " + r.run +
                   "/.train.lock)") != std::string::npos);
    CHECK(std::count(out.begin(), out.end(), '\n') == 1);  // one line, before any work
    CHECK(!a.poll());                                      // the first goes on
  }
  a.kill_now(SIGTERM);
  REQUIRE(a.wait_for(30));
  INFO(a.output());
  REQUIRE(a.exited_with(0));
  const std::string last = latest_checkpoint(r.run);
  const int steps = read_checkpoint_state(last).step;
  CHECK(train_steps(r.run) == one_to(steps));
  // Bit for bit what one uninterrupted process writes at that step: nothing of another process.
  SmallRun ref;
  ref.data = r.data;
  REQUIRE(ref.train("softmax",
                    kSmall + std::vector<std::string>{"--steps", std::to_string(steps)}) == 0);
  for (const std::string f : {"model.safetensors", "optimizer.safetensors"}) {
    INFO(f);
    CHECK(read_file_bytes(last + "/" + f) == read_file_bytes(latest_checkpoint(ref.run) + "/" + f));
  }
  // The lock dies with its process, however it dies: after a SIGKILL the next one proceeds.
  TdaProcess k(r.args("softmax", kSmall + std::vector<std::string>{"--resume", "auto"}),
               r.d.path + "/k.log");
  REQUIRE(k.wait_for_log("resumed from", 60));
  k.kill_now(SIGKILL);
  REQUIRE(k.wait_for(10));
  CHECK(r.train("softmax", kSmall + std::vector<std::string>{"--resume", "auto", "--steps",
                                                             std::to_string(steps + 1)}) == 0);
}

TEST_CASE("resume auto: a run with no intact checkpoint is refused, never started over",
          "[training][badinput]") {
  SmallRun r;
  const std::vector<std::string> ck1 = {"--set", "train.checkpoint_every=1"};
  REQUIRE(r.train("softmax", ck1 + std::vector<std::string>{"--steps", "2"}) == 0);
  const auto metrics = read_file_bytes(r.run + "/metrics.jsonl");
  const auto resume2 = ck1 + std::vector<std::string>{"--steps", "3", "--resume", "auto"};

  // Checkpoints gone (deleted, a scratch purge): it used to start at step 1 and exit 0,
  // replacing metrics.jsonl.
  fs::rename(r.run + "/checkpoints", r.d.path + "/saved");
  CHECK(r.train("softmax", resume2) == 1);
  INFO(r.out);
  CHECK(r.out.find("error: --resume auto: " + r.run +
                   " holds a run with no intact checkpoint (metrics.jsonl records a checkpoint "
                   "at step 2): nothing to resume from, and it is not started over silently; "
                   "pass --overwrite") != std::string::npos);
  CHECK(read_file_bytes(r.run + "/metrics.jsonl") == metrics);

  // All corrupt: the first try rightly fails; the second used to start over with exit 0.
  fs::rename(r.d.path + "/saved", r.run + "/checkpoints");
  for (const char* s : {"step_00000001", "step_00000002"}) {
    const std::string f = r.run + "/checkpoints/" + s + "/model.safetensors";
    auto b = read_file_bytes(f);
    b.back() ^= 0x55;
    write_text(f, std::string(b.begin(), b.end()));
  }
  CHECK(r.train("softmax", resume2) == 1);
  CHECK(r.out.find("every checkpoint in " + r.run + "/checkpoints is corrupt") !=
        std::string::npos);
  CHECK(r.train("softmax", resume2) == 1);
  CHECK(r.out.find("kept aside: step_00000001.corrupt step_00000002.corrupt): nothing to resume "
                   "from") != std::string::npos);
  CHECK(read_file_bytes(r.run + "/metrics.jsonl") == metrics);
  CHECK(fs::exists(r.run + "/checkpoints/step_00000002.corrupt/optimizer.safetensors"));
  // The way to start again is explicit.
  CHECK(r.train("softmax", ck1 + std::vector<std::string>{"--steps", "1", "--overwrite"}) == 0);
  CHECK(train_steps(r.run) == one_to(1));
}

TEST_CASE(
    "resume auto: a run killed before its first checkpoint starts at step 0, its records "
    "kept",
    "[training]") {
  SmallRun r;
  TdaProcess p(
      r.args("softmax", kSmall + std::vector<std::string>{"--set", "train.checkpoint_every=0"}),
      r.d.path + "/p.log");
  REQUIRE(p.wait_for_log("step      3/", 60));
  p.kill_now(SIGKILL);
  REQUIRE(p.wait_for(10));
  REQUIRE(complete_checkpoints(r.run).empty());
  const size_t before = train_steps(r.run).size();
  REQUIRE(before >= 3);
  REQUIRE(r.train("softmax",
                  kSmall + std::vector<std::string>{"--resume", "auto", "--steps", "2", "--set",
                                                    "train.checkpoint_every=0"}) == 0);
  INFO(r.out);
  CHECK(r.out.find("that never wrote a checkpoint: starting it at step 0") != std::string::npos);
  CHECK(train_steps(r.run) == one_to(2));
  std::ifstream f(r.run + "/metrics.superseded.jsonl");
  size_t moved = 0;
  for (std::string line; std::getline(f, line);)
    moved += nlohmann::json::parse(line).at("type") == "train";
  CHECK(moved == before);
}

TEST_CASE("resume auto: a newest checkpoint with a file missing is skipped and kept, never deleted",
          "[training][checkpoint]") {
  SmallRun r;
  const std::vector<std::string> ck = {"--set", "train.checkpoint_every=1", "--set",
                                       "train.keep_checkpoints=0"};
  REQUIRE(r.train("softmax", ck + std::vector<std::string>{"--steps", "3"}) == 0);
  const std::string c = r.run + "/checkpoints/";
  const auto model3 = read_file_bytes(c + "step_00000003/model.safetensors");
  const auto opt2 = read_file_bytes(c + "step_00000002/optimizer.safetensors");

  // No optimizer file: it used to stop --resume auto ("cannot open for reading").
  fs::remove(c + "step_00000003/optimizer.safetensors");
  REQUIRE(r.train("softmax", ck + std::vector<std::string>{"--steps", "4", "--resume", "auto"}) ==
          0);
  INFO(r.out);
  CHECK(r.out.find("CORRUPT CHECKPOINT " + c + "step_00000003: " + c +
                   "step_00000003/optimizer.safetensors: missing") != std::string::npos);
  CHECK(r.out.find("resumed from " + c + "step_00000002 at step 2") != std::string::npos);
  CHECK(read_file_bytes(c + "step_00000003.corrupt/model.safetensors") == model3);

  // No state.json: the start-up repair used to delete the directory, its model and optimizer
  // files (which pass their checksums) with it.
  const auto model4 = read_file_bytes(c + "step_00000004/model.safetensors");
  const auto opt4 = read_file_bytes(c + "step_00000004/optimizer.safetensors");
  fs::remove(c + "step_00000004/state.json");
  REQUIRE(r.train("softmax", ck + std::vector<std::string>{"--steps", "5", "--resume", "auto"}) ==
          0);
  CHECK(r.out.find("INCOMPLETE CHECKPOINT " + c + "step_00000004 (no state.json)") !=
        std::string::npos);
  CHECK(r.out.find("resumed from " + c + "step_00000003 at step 3") != std::string::npos);
  CHECK(read_file_bytes(c + "step_00000004.corrupt/model.safetensors") == model4);
  CHECK(read_file_bytes(c + "step_00000004.corrupt/optimizer.safetensors") == opt4);
  SafetensorsFile(c + "step_00000004.corrupt/model.safetensors").verify_all();
  CHECK(read_file_bytes(c + "step_00000002/optimizer.safetensors") == opt2);
  CHECK(train_steps(r.run) == one_to(5));
}

TEST_CASE("SIGHUP (a closed terminal) checkpoints the last finished step and exits 0",
          "[training]") {
  SmallRun r;
  TdaProcess p(
      r.args("softmax", kSmall + std::vector<std::string>{"--set", "train.checkpoint_every=0"}),
      r.d.path + "/p.log");
  REQUIRE(p.wait_for_log("step      2/", 60));
  p.kill_now(SIGHUP);  // it used to die at once, every step since the last checkpoint lost
  REQUIRE(p.wait_for(30));
  INFO(p.output());
  CHECK(p.exited_with(0));
  const std::vector<long> steps = train_steps(r.run);
  REQUIRE(!steps.empty());
  CHECK(p.output().find("stop signal " + std::to_string(SIGHUP) +
                        " received: checkpointing at step " + std::to_string(steps.back())) !=
        std::string::npos);
  CHECK(latest_checkpoint(r.run) ==
        r.run + "/checkpoints/" + checkpoint_dir_name(int(steps.back())));
  load_model_for_eval(latest_checkpoint(r.run));  // complete, checksums verified

  // Started under nohup (SIGHUP ignored), a closed terminal does not stop it.
  fs::remove_all(r.run);
  const auto old = std::signal(SIGHUP, SIG_IGN);  // inherited through fork and exec
  TdaProcess q(r.args("softmax", kSmall), r.d.path + "/q.log");
  std::signal(SIGHUP, old);
  REQUIRE(q.wait_for_log("step      2/", 60));
  q.kill_now(SIGHUP);
  CHECK(!q.wait_for(0.5));
  q.kill_now(SIGTERM);
  REQUIRE(q.wait_for(30));
  CHECK(q.exited_with(0));
}

TEST_CASE(
    "a start that fails leaves nothing that blocks its corrected retry, and bad data in the "
    "last shard fails before step 1",
    "[training][badinput]") {
  SmallRun r;
  // Three train shards; the last holds a token id past the byte vocabulary (256).
  const std::vector<char> text = read_file_bytes(source_dir() + "/data/tinyshakespeare/input.txt");
  std::vector<uint16_t> toks(text.begin(), text.begin() + 30000);
  for (int s = 0; s < 3; ++s)
    write_shard(r.d.path + "/part_" + std::to_string(s) + ".bin", toks.data() + s * 10000, 10000);
  toks[29000] = 300;
  write_shard(r.d.path + "/part_2.bin", toks.data() + 20000, 10000);
  // A bad first shard, which the first step reads: the failed start used to leave config.json
  // and an empty metrics.jsonl, and the corrected command was refused as "already holds a run".
  write_shard(r.d.path + "/first.bin", toks.data() + 20000, 10000);
  const std::vector<std::string> first = {"--set", "data.train=" + r.d.path + "/first.bin",
                                          "--steps", "1"};
  CHECK(r.train("softmax", first) == 1);
  CHECK(r.out.find("error: " + r.d.path + "/first.bin: token id 300 >= vocab 256") !=
        std::string::npos);
  CHECK(!fs::exists(r.run + "/metrics.jsonl"));
  CHECK(!fs::exists(r.run + "/config.json"));
  write_shard(r.d.path + "/first.bin", toks.data(), 10000);
  CHECK(r.train("softmax", first) == 0);  // as typed the first time
  fs::remove_all(r.run);

  const std::vector<std::string> shards = {"--set", "data.train=" + r.d.path + "/part_*.bin",
                                           "--steps", "1"};
  // One step reads only the first shard: the bad one used to be found hours in, if at all.
  CHECK(r.train("softmax", shards) == 1);
  INFO(r.out);
  CHECK(r.out.find("error: " + r.d.path + "/part_2.bin: token id 300 >= vocab 256 at offset " +
                   std::to_string(1024 + 2 * 9000)) != std::string::npos);
  CHECK(r.out.find("step ") == std::string::npos);  // before the first step
  CHECK(!fs::exists(r.run + "/metrics.jsonl"));
  CHECK(!fs::exists(r.run + "/config.json"));
  // The corrected command, as typed the first time (no --overwrite, no --resume), now runs: it
  // used to be refused as "already holds a run" by the files of the failed start.
  toks[29000] = 'a';
  write_shard(r.d.path + "/part_2.bin", toks.data() + 20000, 10000);
  CHECK(r.train("softmax", shards) == 0);
  CHECK(train_steps(r.run) == one_to(1));
}
