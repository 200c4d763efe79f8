// `tda sweep` end to end (docs/sweeps.md): a two-run micro sweep trains, evaluates with the
// paper's protocol on tiny inputs and reports, and the report's tables equal the runs' own
// metrics; a sweep killed (SIGKILL) and one interrupted (SIGINT) mid-run resume and finish with
// every step trained once; a failed run is recorded, blocks the run that starts from it, and
// does not stop the others.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "test_report_util.h"
#include "test_run_util.h"

using namespace tda;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

json read_json(const std::string& path) {
  return json::parse(slurp(path));
}

// The train records' steps of a metrics.jsonl, in file order.
std::vector<int> train_steps(const std::string& metrics) {
  std::vector<int> steps;
  std::istringstream in(slurp(metrics));
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line, nullptr, false);
    if (j.is_object() && j.value("type", "") == "train") steps.push_back(j["step"]);
  }
  return steps;
}

bool has_resume_record(const std::string& metrics) {
  return slurp(metrics).find("\"type\":\"resume\"") != std::string::npos;
}

// Waits until `metrics` holds a train record of step >= `step` (false after `seconds`).
bool wait_for_step(const std::string& metrics, int step, double seconds, TdaProcess& p) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end && !p.poll()) {
    const auto s = train_steps(metrics);
    if (!s.empty() && s.back() >= step) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// A spec over the byte-level corpus (256-token vocabulary: small checkpoints, fast steps), the
// given runs, only the validation-loss evaluation.
json byte_spec(const std::vector<std::string>& corpus_sets, int max_steps, const json& runs) {
  json set = {{"model.seq_len", 64},    {"train.total_batch_tokens", 128},
              {"train.micro_batch", 2}, {"train.max_steps", max_steps},
              {"train.val_every", 0},   {"train.checkpoint_every", 5}};
  for (size_t i = 1; i < corpus_sets.size(); i += 2) {  // "--set", "k=v" pairs
    const std::string kv = corpus_sets[i];
    const auto eq = kv.find('=');
    const std::string v = kv.substr(eq + 1);
    set[kv.substr(0, eq)] =
        v.find_first_not_of("0123456789") == std::string::npos ? json(std::stoi(v)) : json(v);
  }
  const json off = {{"enabled", false}};
  return {{"config", source_dir() + "/configs/tiny/base.json"},
          {"set", set},
          {"runs", runs},
          {"eval",
           {{"val", {{"sequences", 4}}},
            {"mc", off},
            {"diag", off},
            {"passkey", off},
            {"scrolls", off}}}};
}

}  // namespace

TEST_CASE("tda sweep: a two-run micro sweep trains, evaluates and reports the runs' own numbers",
          "[sweep][report]") {
  TempDir dir;
  const std::string src = source_dir(), sw = dir.path + "/micro";
  // Zero-shot data in the layout of scripts/prepare_evals.py: two questions for two tasks; the
  // other four tasks have no data and must be skipped, not failed.
  fs::create_directories(dir.path + "/evals/mosaicml_icl");
  const std::string mcq =
      "{\"query\": \"Question: What do plants need to grow?\\nAnswer:\", \"choices\": "
      "[\"water and light\", \"plastic\", \"iron bars\"], \"gold\": 0}\n"
      "{\"query\": \"Question: Which is the largest?\\nAnswer:\", \"choices\": [\"a mouse\", "
      "\"an elephant\"], \"gold\": 1}\n";
  write_text(dir.path + "/evals/mosaicml_icl/arc_easy.jsonl", mcq);
  write_text(dir.path + "/evals/mosaicml_icl/openbook_qa.jsonl", mcq);
  fs::create_directories(dir.path + "/scrolls/qasper");
  fs::copy_file(src + "/tests/data/scrolls_qasper_tiny.jsonl",
                dir.path + "/scrolls/qasper/validation.jsonl");
  // val.sequences = val_batches x micro_batch: eval/val.json must equal the trainer's last val.
  const json spec = {
      {"name", "micro"},
      {"config", src + "/configs/tiny/base.json"},
      {"set",
       {{"model.seq_len", 64},
        {"train.total_batch_tokens", 128},
        {"train.micro_batch", 2},
        {"train.max_steps", 3},
        {"train.val_every", 2},
        {"train.val_batches", 1},
        {"data.train", src + "/data/tinyshakespeare/tiny_shakespeare_train.bin"},
        {"data.val", src + "/data/tinyshakespeare/tiny_shakespeare_val.bin"}}},
      {"runs",
       {{{"name", "softmax"}, {"set", {{"attention.kind", "softmax"}}}},
        {{"name", "tda"}, {"set", {{"attention.kind", "tda"}}}}}},
      {"eval",
       {{"val", {{"sequences", 2}}},
        {"mc", {{"limit", 0}, {"arc_fix", false}}},
        {"diag", {{"sequences", 2}, {"long_factor", 2}, {"long_sequences", 1}}},
        {"passkey", {{"lengths", {120}}, {"trials", 1}, {"needles", {1, 2}}}},
        {"scrolls", {{"groups", json::array()}, {"limit", 1}, {"max_new_tokens", 4}}}}}};
  write_text(dir.path + "/micro.json", spec.dump(1));
  std::string log;
  const std::string cmd = "sweep " + dir.path + "/micro.json --out " + sw + " --eval-data " +
                          dir.path + "/evals --scrolls-data " + dir.path + "/scrolls";
  REQUIRE(run_tda(cmd, &log) == 0);
  INFO(log);

  // sweep.json: run order and groups, as the report reads them
  const json sj = read_json(sw + "/sweep.json");
  REQUIRE(sj["runs"].size() == 2);
  CHECK(sj["runs"][0]["name"] == "softmax");
  CHECK(sj["runs"][1]["group"] == "main");
  const json st = read_json(sw + "/status.json");
  for (const std::string run : {"softmax", "tda"}) {
    INFO(run);
    const json& r = st["runs"][run];
    CHECK(r["state"] == "done");
    CHECK(r["step"] == 3);
    for (const std::string e : {"val", "mc_arc_easy", "mc_openbookqa", "diag", "diag_init",
                                "diag_long", "passkey_n1", "passkey_n2", "scrolls_qasper"}) {
      CHECK(r["evals"][e] == "done");
      CHECK(fs::exists(sw + "/" + run + "/eval/" + e + ".json"));
    }
    for (const std::string e : {"mc_hellaswag", "mc_arc_challenge", "mc_piqa", "mc_winogrande",
                                "scrolls_qmsum", "scrolls_summ_screen_fd", "scrolls_gov_report"}) {
      CHECK(r["evals"][e] == "skipped");
      CHECK(r["eval_notes"][e].get<std::string>().find("data at") != std::string::npos);
      CHECK(!fs::exists(sw + "/" + run + "/eval/" + e + ".json"));
    }
    // the passkey and long diagnostics are the protocol's, on the run's own checkpoint
    const json pk = read_json(sw + "/" + run + "/eval/passkey_n2.json");
    CHECK(pk["lengths"][0]["length"] == 120);
    const json dl = read_json(sw + "/" + run + "/eval/diag_long.json");
    CHECK(dl["T"] == 128);
    CHECK(read_json(sw + "/" + run + "/eval/diag_init.json")["untrained"] == true);
  }

  // A second sweep finds everything done: nothing is trained or recomputed.
  const auto stamp = fs::last_write_time(sw + "/tda/eval/diag.json");
  REQUIRE(run_tda(cmd, &log) == 0);
  CHECK(log.find("training") == std::string::npos);
  CHECK(fs::last_write_time(sw + "/tda/eval/diag.json") == stamp);

  if (!run_report(sw, &log)) return;
  const std::string out = sw + "/report/", md = slurp(out + "report.md");
  const auto t1 = csv_by_run(out + "table1.csv");
  for (const std::string run : {"softmax", "tda"}) {
    INFO(run);
    const auto& row = t1.at(run);
    const std::string rd = sw + "/" + run;
    // The sweep's validation loss is the trainer's own last validation (same windows, batch,
    // weights): the table shows exactly the number in metrics.jsonl.
    const double val = read_json(rd + "/eval/val.json")["val_loss"];
    CHECK(val == last_val_loss(rd + "/metrics.jsonl"));
    CHECK(std::stod(row.at("val_loss")) == val);
    CHECK(md_row(md, "Table 1", row.at("method"))[1].find(fmt(val, 4)) != std::string::npos);
    for (const std::string task : {"arc_easy", "openbookqa"}) {
      const json mc = read_json(rd + "/eval/mc_" + task + ".json");
      CHECK(mc["n"] == 2);
      CHECK(std::stod(row.at(task + "_acc")) == mc["acc"].get<double>());
      CHECK(std::stod(row.at(task + "_acc_norm")) == mc["acc_norm"].get<double>());
    }
    CHECK(row.at("hellaswag_acc").empty());
    const json dg = read_json(rd + "/eval/diag.json");
    CHECK(std::stod(row.at("sparsity")) == dg["means"]["effective"]["sparsity"].get<double>());
    const json qa = read_json(rd + "/eval/scrolls_qasper.json");
    CHECK(std::stod(csv_by_run(out + "table2_scrolls.csv").at(run).at("qasper")) ==
          qa["score"].get<double>());
  }
  CHECK(md_row(md, "Table 1", t1.at("tda").at("method"))[13].rfind("**", 0) == 0);  // sparsest
  CHECK(md.find("Val. loss from eval/val.json") != std::string::npos);
}

TEST_CASE("tda sweep: killed and interrupted sweeps resume and finish, every step trained once",
          "[sweep]") {
  TempDir dir;
  const int steps = 60;
  const json spec = byte_spec(byte_corpus(dir.path), steps,
                              {{{"name", "softmax"}, {"set", {{"attention.kind", "softmax"}}}},
                               {{"name", "tda"}, {"set", {{"attention.kind", "tda"}}}}});
  write_text(dir.path + "/s.json", spec.dump(1));
  const std::string sw = dir.path + "/sw";
  const std::vector<std::string> args = {"sweep", dir.path + "/s.json", "--out",
                                         sw,      "--progress-every",   "1"};
  {  // SIGKILL the sweep while softmax trains: its child checkpoints on SIGTERM (PDEATHSIG)
    TdaProcess p(args, dir.path + "/log1.txt");
    REQUIRE(wait_for_step(sw + "/softmax/metrics.jsonl", 10, 120, p));
    p.kill_now(SIGKILL);
    REQUIRE(p.wait_for(10));
    CHECK(p.killed());
  }
  {  // SIGINT the resumed sweep while tda trains: exit 130, the run interrupted, not failed
    TdaProcess p(args, dir.path + "/log2.txt");
    REQUIRE(wait_for_step(sw + "/tda/metrics.jsonl", 10, 120, p));
    p.kill_now(SIGINT);
    REQUIRE(p.wait_for(60));
    INFO(p.output());
    CHECK(p.exited_with(130));
    CHECK(p.output().find("softmax: resuming from") != std::string::npos);
    const json st = read_json(sw + "/status.json");
    CHECK(st["runs"]["softmax"]["state"] == "done");
    CHECK(st["runs"]["tda"]["state"] == "interrupted");
  }
  TdaProcess p(args, dir.path + "/log3.txt");
  REQUIRE(p.wait_for(120));
  INFO(p.output());
  CHECK(p.exited_with(0));
  CHECK(p.output().find("tda: resuming from") != std::string::npos);
  const json st = read_json(sw + "/status.json");
  for (const std::string run : {"softmax", "tda"}) {
    INFO(run);
    const std::string m = sw + "/" + run + "/metrics.jsonl";
    CHECK(st["runs"][run]["state"] == "done");
    CHECK(st["runs"][run]["evals"]["val"] == "done");
    CHECK(has_resume_record(m));  // it was stopped mid-run and resumed
    std::vector<int> want(steps);
    std::iota(want.begin(), want.end(), 1);
    CHECK(train_steps(m) == want);  // each step once, in order
    CHECK(fs::exists(sw + "/" + run + "/checkpoints/step_00000060/state.json"));
  }
}

TEST_CASE("tda sweep: a failed run is recorded, blocks its extension, and the others finish",
          "[sweep]") {
  TempDir dir;
  const json spec = byte_spec(
      byte_corpus(dir.path), 4,
      {{{"name", "bad"},
        {"set", {{"attention.kind", "softmax"}, {"data.train", dir.path + "/none/*.bin"}}}},
       {{"name", "ext"},
        {"group", "extension"},
        {"init_from", "bad"},
        {"set", {{"model.seq_len", 128}, {"train.micro_batch", 1}}}},
       {{"name", "good"}, {"set", {{"attention.kind", "tda"}}}}});
  write_text(dir.path + "/s.json", spec.dump(1));
  const std::string sw = dir.path + "/sw";
  std::string log;
  CHECK(run_tda("sweep " + dir.path + "/s.json --out " + sw, &log) == 1);
  INFO(log);
  CHECK(log.find("bad: failed: error: data: no file matches") != std::string::npos);
  CHECK(log.find("ext: blocked: init_from run bad has not trained (failed)") != std::string::npos);
  const json st = read_json(sw + "/status.json");
  CHECK(st["runs"]["bad"]["state"] == "failed");
  CHECK(st["runs"]["bad"]["error"].get<std::string>().find("no file matches") != std::string::npos);
  CHECK(st["runs"]["ext"]["state"] == "blocked");
  CHECK(st["runs"]["good"]["state"] == "done");
  CHECK(fs::exists(sw + "/good/eval/val.json"));
  if (!run_report(sw, &log)) return;
  const std::string md = slurp(sw + "/report/report.md");
  CHECK(md.find("run bad: failed (error: data: no file matches") != std::string::npos);
  CHECK(md.find("run ext: blocked") != std::string::npos);
}

TEST_CASE("tda eval val equals the trainer's validation on the same windows", "[eval][sweep]") {
  TempDir dir;
  const auto data = byte_corpus(dir.path);
  std::vector<std::string> args = {"train",
                                   "--config",
                                   source_dir() + "/configs/tiny/base.json",
                                   "--out",
                                   dir.path + "/run",
                                   "--set",
                                   "model.seq_len=64",
                                   "--set",
                                   "train.total_batch_tokens=128",
                                   "--set",
                                   "train.micro_batch=2",
                                   "--set",
                                   "train.max_steps=3",
                                   "--set",
                                   "train.val_every=3",
                                   "--set",
                                   "train.val_batches=2"};
  args.insert(args.end(), data.begin(), data.end());
  TdaProcess t(args, dir.path + "/train.txt");
  REQUIRE(t.wait_for(120));
  REQUIRE(t.exited_with(0));
  const double trained = last_val_loss(dir.path + "/run/metrics.jsonl");
  const std::string ck = " --checkpoint " + dir.path + "/run/checkpoints/step_00000003";
  auto val = [&](const std::string& flags) {
    std::string out;
    REQUIRE(run_tda("eval val" + ck + flags + " --out " + dir.path + "/v.json", &out) == 0);
    return read_json(dir.path + "/v.json");
  };
  const json same = val(" --sequences 4");  // val_batches x micro_batch
  CHECK(same["val_loss"].get<double>() == trained);
  CHECK(same["sequences"] == 4);
  CHECK(same["tokens"] == 256);
  CHECK(same["step"] == 3);
  CHECK(val(" --sequences 4 --batch 1")["val_loss"].get<double>() == Approx(trained).epsilon(1e-6));
  // negative controls: other windows give another number
  CHECK(val(" --sequences 8")["val_loss"].get<double>() != trained);
  CHECK(val(" --sequences 4 --data " + dir.path + "/train.bin")["val_loss"].get<double>() !=
        trained);
  std::string out;
  CHECK(run_tda("eval val" + ck + " --data " + dir.path + "/missing.bin", &out) == 1);
  CHECK(out.find("error: data: no file matches") != std::string::npos);
}
