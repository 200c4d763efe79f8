// train.eval_every (docs/evaluation.md, "During training"): a tiny run scores a small HellaSwag
// file at its steps, and every record equals `tda eval mc` on that step's checkpoint (the same
// evaluator, the items split over the ranks and the counts summed); a resume keeps the cadence
// and writes each step's record once; a missing file or a vocabulary the task cannot use stops
// the run at start-up, naming the file or the key.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_util.h"
#include "train/checkpoint.h"
#include "train/loop_eval.h"

using namespace tda;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Seven items in rowanz/hellaswag's jsonl form, the endings different enough in length and
// words that the two metrics can disagree.
void write_hellaswag(const std::string& path) {
  const char* rows[] = {
      R"({"activity_label": "Baking", "ctx_a": "A woman mixes flour and eggs.", "ctx_b": "she", "endings": ["puts the bowl in the oven.", "swims.", "reads the long history of the kingdom aloud to nobody.", "is a car."], "label": 0})",
      R"({"activity_label": "Running", "ctx_a": "A man ties his shoes.", "ctx_b": "he", "endings": ["flies.", "starts running down the road.", "the the the.", "eats a lamp slowly while singing."], "label": 1})",
      R"({"activity_label": "Painting", "ctx_a": "A child holds a brush.", "ctx_b": "the child", "endings": ["sleeps.", "is blue.", "paints a red house on the paper.", "walks."], "label": 2})",
      R"({"activity_label": "Swimming", "ctx_a": "People stand by a pool.", "ctx_b": "they", "endings": ["jump.", "cook.", "sing.", "dive into the water and swim."], "label": 3})",
      R"({"activity_label": "Cooking", "ctx_a": "A chef chops onions.", "ctx_b": "he", "endings": ["adds them to the hot pan.", "flies away.", "is a tree.", "reads."], "label": 0})",
      R"({"activity_label": "Reading", "ctx_a": "A girl opens a book.", "ctx_b": "she", "endings": ["explodes.", "reads the first page.", "runs.", "is tall."], "label": 1})",
      R"({"activity_label": "Sleeping", "ctx_a": "A cat lies on a bed.", "ctx_b": "it", "endings": ["barks.", "drives.", "falls asleep in the sun.", "sings."], "label": 2})"};
  std::string text;
  for (const char* r : rows) text += std::string(r) + "\n";
  write_text(path, text);
}

struct EvalRecord {
  int step;
  double acc, acc_norm;
  long items;
};

std::vector<EvalRecord> eval_records(const std::string& metrics) {
  std::vector<EvalRecord> out;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line, nullptr, false);
    if (j.is_object() && j.value("type", "") == "eval") {
      CHECK(j["task"] == "hellaswag");
      out.push_back({j["step"], j["acc"], j["acc_norm"], j["items"]});
    }
  }
  return out;
}

// A 1-layer GPT-2-vocabulary model on the bundled Tiny Shakespeare tokens, evaluated every 2
// steps on the first 5 items.
std::string train_cmd(const std::string& run, const std::string& data, const std::string& extra) {
  const std::string src = source_dir();
  return "train --config " + src + "/configs/tiny/softmax.json --out " + run +
         " --set model.n_layer=1 --set model.d_model=64 --set model.n_head=1"
         " --set model.seq_len=64 --set train.micro_batch=2 --set train.total_batch_tokens=256"
         " --set train.max_steps=6 --set train.val_every=0 --set train.log_every=1"
         " --set train.checkpoint_every=2 --set train.keep_checkpoints=0"
         " --set train.eval_every=2 --set train.eval_items=5 --set train.eval_data=" +
         data + " --set data.train=" + src + "/data/tinyshakespeare/tiny_shakespeare_train.bin" +
         " --set data.val=" + src + "/data/tinyshakespeare/tiny_shakespeare_val.bin " + extra;
}

// Trains 4 steps, resumes to 6, and checks every record against `tda eval mc`.
void check_loop_eval(const std::string& launcher) {
  TempDir d;
  const std::string data = d.path + "/hs.jsonl", run = d.path + "/run";
  write_hellaswag(data);
  std::string log;
  const int rc = run_tda(train_cmd(run, data, launcher + " --steps 4"), &log);
  INFO(log);
  REQUIRE(rc == 0);
  CHECK(log.find("eval hellaswag acc") != std::string::npos);  // the step line
  REQUIRE(run_tda(train_cmd(run, data, launcher + " --resume auto"), &log) == 0);
  INFO(log);
  // Step 4 was evaluated by both starts: the resumed one's record replaces the first.
  const std::vector<EvalRecord> recs = eval_records(run + "/metrics.jsonl");
  REQUIRE(recs.size() == 4);
  for (size_t i = 0; i < recs.size(); ++i) {
    CHECK(recs[i].step == int(2 * i));
    CHECK(recs[i].items == 5);
  }
  for (const EvalRecord& r : recs) {
    if (r.step == 0) continue;  // no checkpoint of the initial weights
    INFO("step " << r.step);
    std::string out;
    const std::string ck = run + "/checkpoints/" + checkpoint_dir_name(r.step);
    REQUIRE(run_tda("eval mc --checkpoint " + ck + " --task hellaswag --data " + data +
                        " --limit 5 --batch-tokens 128 --quiet --out " + d.path + "/mc.json",
                    &out) == 0);
    std::ifstream f(d.path + "/mc.json");
    const json mc = json::parse(f);
    CHECK(mc["n"] == 5);
    CHECK(mc["acc"].get<double>() == r.acc);
    CHECK(mc["acc_norm"].get<double>() == r.acc_norm);
  }
}

}  // namespace

TEST_CASE("loop eval: the ranks' shares are the first N items, each once", "[eval][train]") {
  McDataset d;
  d.task = "hellaswag";
  for (int i = 0; i < 7; ++i) {
    McItem it;
    it.line = i + 1;
    d.items.push_back(it);
  }
  for (int world : {1, 2, 3, 8}) {
    std::vector<int> seen;
    for (int r = 0; r < world; ++r)
      for (const McItem& it : rank_share(d, 5, r, world).items) seen.push_back(it.line - 1);
    std::sort(seen.begin(), seen.end());
    CHECK(seen == std::vector<int>{0, 1, 2, 3, 4});
  }
  CHECK(rank_share(d, 0, 0, 2).items.size() == 4);  // 0: every item
}

TEST_CASE("loop eval: records at eval_every steps equal tda eval mc, across a resume",
          "[eval][train]") {
  check_loop_eval("");
}

TEST_CASE("loop eval: two ranks split the items and report what one evaluator would",
          "[eval][train][mpi]") {
  check_loop_eval("--procs 2");
}

TEST_CASE("loop eval: a missing task file or a non-GPT-2 vocabulary fails at start-up",
          "[eval][train]") {
  TempDir d;
  const std::string run = d.path + "/run", missing = d.path + "/nope.jsonl";
  std::string log;
  CHECK(run_tda(train_cmd(run, missing, ""), &log) != 0);
  INFO(log);
  CHECK(log.find(missing) != std::string::npos);
  CHECK(log.find("train.eval_data") != std::string::npos);
  CHECK(log.find("step ") == std::string::npos);  // not one step trained
  CHECK(!fs::exists(run + "/metrics.jsonl"));     // and nothing left to refuse a retry
  write_hellaswag(d.path + "/hs.jsonl");
  CHECK(run_tda(train_cmd(run, d.path + "/hs.jsonl",
                          "--set model.vocab_size=256 --set "
                          "model.real_vocab_size=256"),
                &log) != 0);
  CHECK(log.find("'train.eval_every' needs GPT-2's vocabulary") != std::string::npos);
  CHECK(run_tda(train_cmd(run, d.path + "/hs.jsonl", "--set train.eval_task=nope"), &log) != 0);
  CHECK(log.find("'train.eval_task' must be one of hellaswag") != std::string::npos);
  CHECK(run_tda(train_cmd(run, d.path + "/hs.jsonl", "--set train.eval_items=-1"), &log) != 0);
  CHECK(log.find("'train.eval_items' must be >= 0") != std::string::npos);
}
