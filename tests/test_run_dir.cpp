// Run directories as users meet them: an existing run is never overwritten silently, resume
// checks what it resumes, leftovers of a killed writer or pruner are cleaned at start-up, and
// SIGTERM is honoured within a micro-batch, however long the step or validation.
#include <catch2/catch.hpp>
#include <filesystem>

#include "core/config.h"
#include "core/safetensors.h"
#include "test_run_util.h"
#include "train/checkpoint.h"

using namespace tda;
namespace fs = std::filesystem;

TEST_CASE("run dir: an existing run is refused without --resume and --overwrite replaces it",
          "[training][badinput]") {
  SmallRun r;
  REQUIRE(r.train("softmax", {"--steps", "2"}) == 0);
  const auto metrics = read_file_bytes(r.run + "/metrics.jsonl");
  const auto model = read_file_bytes(r.run + "/checkpoints/step_00000002/model.safetensors");
  // The same command again used to truncate metrics.jsonl and mix its checkpoints with the old.
  CHECK(r.train("softmax", {"--steps", "1"}) != 0);
  INFO(r.out);
  CHECK(r.out.find("error: " + r.run +
                   " already holds a run (metrics.jsonl, config.json, "
                   "checkpoints, tb): continue it with --resume auto, train into a fresh --out, or "
                   "pass --overwrite to replace it") != std::string::npos);
  CHECK(read_file_bytes(r.run + "/metrics.jsonl") == metrics);
  CHECK(read_file_bytes(r.run + "/checkpoints/step_00000002/model.safetensors") == model);
  CHECK(r.train("softmax", {"--steps", "1", "--overwrite", "--resume", "auto"}) != 0);
  CHECK(r.out.find("pick one") != std::string::npos);
  // --overwrite: the old run is gone, so --resume auto continues the new one (step 1, not 2).
  REQUIRE(r.train("softmax", {"--steps", "1", "--overwrite"}) == 0);
  CHECK(complete_checkpoints(r.run).size() == 1);
  CHECK(std::distance(fs::directory_iterator(r.run + "/tb"), fs::directory_iterator()) == 1);
  CHECK(latest_checkpoint(r.run).find("step_00000001") != std::string::npos);
  // A directory without a run in it (here: only a user's file) is fine.
  fs::create_directories(r.d.path + "/other");
  write_text(r.d.path + "/other/notes.txt", "mine");
  r.run = r.d.path + "/other";
  CHECK(r.train("softmax", {"--steps", "1"}) == 0);
  CHECK(fs::exists(r.d.path + "/other/notes.txt"));
}

TEST_CASE("resume: another model config is an error naming the keys and both values",
          "[training][badinput]") {
  SmallRun r;
  REQUIRE(r.train("ssmax", {"--steps", "1"}) == 0);
  // Resumed as softmax it dropped ssmax's weights silently and exited 0.
  CHECK(r.train("softmax", {"--steps", "2", "--resume", "auto"}) != 0);
  INFO(r.out);
  CHECK(r.out.find("holds another model than this run's config: attention.kind: checkpoint "
                   "\"ssmax\", this run \"softmax\"") != std::string::npos);
  CHECK(r.train("ssmax", {"--steps", "2", "--resume", "auto", "--set", "model.n_layer=1"}) != 0);
  CHECK(r.out.find("model.n_layer: checkpoint 2, this run 1") != std::string::npos);
  // Training options may change on resume.
  CHECK(r.train("ssmax", {"--steps", "2", "--resume", "auto", "--set", "optim.lr=2e-3"}) == 0);
  CHECK(r.out.find("resumed from") != std::string::npos);
}

TEST_CASE("resume: which config keys must match", "[training]") {
  const json base = config_defaults();
  auto with = [&](const std::string& sec, const std::string& key, const json& v) {
    json j = base;
    j[sec][key] = v;
    return j;
  };
  CHECK(model_config_differences(base, base).empty());
  CHECK(model_config_differences(with("attention", "entmax_solver", "bisect"), base) ==
        "attention.entmax_solver: checkpoint \"bisect\", this run \"sort\"");
  CHECK(model_config_differences(with("model", "rope_theta", 500000.0), base) ==
        "model.rope_theta: checkpoint 500000.0, this run 10000.0");
  // Initial values of tensors the checkpoint holds do not matter...
  CHECK(model_config_differences(with("attention", "lambda_init", 0.2), base).empty());
  CHECK(model_config_differences(with("attention", "ssmax_s_init", 0.2), base).empty());
  CHECK(model_config_differences(with("attention", "beta", 2.0), base).empty());  // learned
  // ...but a fixed beta is part of the math.
  json fixed = with("attention", "learn_beta", false);
  json fixed2 = fixed;
  fixed2["attention"]["beta"] = 2.0;
  CHECK(model_config_differences(fixed2, fixed) == "attention.beta: checkpoint 2.0, this run 1.0");
  // A key the checkpoint predates compares as its default.
  json old = base;
  old["attention"].erase("dex_anneal_steps");
  CHECK(model_config_differences(old, base).empty());
  CHECK(model_config_differences(base, with("train", "micro_batch", 1)).empty());
}

TEST_CASE("resume: a checkpoint with tensors this model does not use is rejected",
          "[training][badinput]") {
  SmallRun r;
  REQUIRE(r.train("softmax", {"--steps", "1"}) == 0);
  const std::string f = latest_checkpoint(r.run) + "/model.safetensors";
  SafetensorsFile sf(f);
  std::vector<std::vector<float>> store;
  std::vector<TensorRef> refs;
  for (const auto& n : sf.names()) {
    auto shp = sf.shape(n);
    size_t numel = 1;
    for (auto s : shp) numel *= size_t(s);
    store.emplace_back(numel);
    sf.read_into(n, shp, store.back().data());
    refs.push_back({n, shp, store.back().data()});
  }
  std::vector<float> extra(4, 1.f);
  refs.push_back({"transformer.h.2.attn.c_proj.weight", {2, 2}, extra.data()});
  write_safetensors(f, refs);
  CHECK(r.train("softmax", {"--steps", "2", "--resume", "auto"}) != 0);
  INFO(r.out);
  CHECK(r.out.find("holds tensor 'transformer.h.2.attn.c_proj.weight' that this model does not "
                   "have") != std::string::npos);
}

TEST_CASE("run dir: leftovers of a killed writer or pruner are cleaned at start-up", "[training]") {
  SmallRun r;
  REQUIRE(r.train("softmax", {"--steps", "2", "--set", "train.checkpoint_every=1", "--set",
                              "train.keep_checkpoints=0"}) == 0);
  const std::string ck = r.run + "/checkpoints/";
  // Killed while pruning in place (older tda): step_1 without state.json, kept aside below.
  fs::remove(ck + "step_00000001/state.json");
  // Killed while writing step 4 (partial tmp) and while deleting step 0 (trash).
  fs::create_directories(ck + ".step_00000004.tmp");
  write_text(ck + ".step_00000004.tmp/model.safetensors", "partial");
  fs::create_directories(ck + ".step_00000000.trash");
  write_text(ck + ".step_00000000.trash/optimizer.safetensors", "half deleted");
  // Killed between moving an old step_3 aside and renaming its complete replacement in place.
  fs::rename(ck + "step_00000002", ck + ".step_00000003.tmp");
  REQUIRE(r.train("softmax", {"--steps", "3", "--resume", "auto", "--set",
                              "train.checkpoint_every=1", "--set", "train.keep_checkpoints=0"}) ==
          0);
  INFO(r.out);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(ck)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  // The complete tmp became step_3 and was resumed from (it holds step 2's state).
  CHECK(r.out.find("finished an interrupted checkpoint write: " + ck + "step_00000003") !=
        std::string::npos);
  CHECK(r.out.find("resumed from " + ck + "step_00000003 at step 2") != std::string::npos);
  // The incomplete step_1 is kept (its model file passes its checksums), out of the way.
  CHECK(r.out.find("INCOMPLETE CHECKPOINT " + ck +
                   "step_00000001 (no state.json): not "
                   "resumable; kept as " +
                   ck + "step_00000001.corrupt") != std::string::npos);
  CHECK(left == std::vector<std::string>{"step_00000001.corrupt", "step_00000003"});
}

TEST_CASE("SIGTERM is honoured within a micro-batch however long the step or validation",
          "[training]") {
  SmallRun r;
  // A step of 100,000 micro-batches, or a validation of 100,000 batches: minutes each. A stop
  // used to wait for the end of the step (and validation did not look at it at all).
  for (const std::vector<std::string>& sets :
       {std::vector<std::string>{"--set", "train.total_batch_tokens=12800000", "--set",
                                 "train.micro_batch=1"},
        std::vector<std::string>{"--set", "train.val_every=1", "--set",
                                 "train.val_batches=100000"}}) {
    fs::remove_all(r.run);
    std::vector<std::string> args = {
        "train", "--config",         source_dir() + "/configs/tiny/softmax.json", "--out", r.run,
        "--set", "train.val_every=0"};
    args.insert(args.end(), r.data.begin(), r.data.end());
    args.insert(args.end(), sets.begin(), sets.end());
    TdaProcess p(args, r.d.path + "/log.txt");
    REQUIRE(p.wait_for_log("grad-accum steps", 60));  // the loop has started
    p.kill_now(SIGTERM);
    const bool stopped = p.wait_for(20);
    INFO(sets[1] << "\n" << p.output());
    CHECK(stopped);
    CHECK(p.exited_with(0));
    CHECK(p.output().find("nothing new to save at step 0") != std::string::npos);
    CHECK(complete_checkpoints(r.run).empty());
  }
}
