// scripts/plot_runs.py on synthetic metrics.jsonl files: the CSV holds every train and val
// record once (records a resume replayed dropped, a cut line skipped), tokens from the config's
// batch, and TensorBoard's debiased EMA (computed here independently); runs come from run
// directories and from a sweep directory in sweep.json's order; the PNG is written.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_report_util.h"
#include "test_util.h"

using namespace tda;
using nlohmann::json;

namespace {

std::string python() {
  const std::string venv = source_dir() + "/.venv/bin/python";
  return std::filesystem::exists(venv) ? venv : "python3";
}

// run -> metric -> step -> (value, smoothed), from the CSV
using Curves =
    std::map<std::string, std::map<std::string, std::map<int, std::pair<double, double>>>>;

Curves read_curves(const std::string& path, std::map<std::string, std::map<int, long>>* tokens) {
  std::istringstream in(slurp(path));
  std::string line;
  std::getline(in, line);
  CHECK(line == "run,type,step,tokens,metric,value,smoothed");
  Curves c;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    REQUIRE(f.size() == 7);
    c[f[0]][f[4]][std::stoi(f[2])] = {std::stod(f[5]), std::stod(f[6])};
    (*tokens)[f[0]][std::stoi(f[2])] = f[3].empty() ? -1 : std::stol(f[3]);
  }
  return c;
}

}  // namespace

TEST_CASE("plot_runs.py: loss curves of several runs as CSV (values, smoothing) and PNG",
          "[report]") {
  TempDir d;
  const auto train = [](int step, double loss) {
    return json({{"type", "train"},
                 {"step", step},
                 {"loss", loss},
                 {"lr", 1e-3 * step},
                 {"grad_norm", 2.0 / step},
                 {"ms", 10.0},
                 {"tokens_per_s", 1000.0 + step}})
               .dump() +
           "\n";
  };
  const auto val = [](int step, double loss) {
    return json({{"type", "val"}, {"step", step}, {"val_loss", loss}}).dump() + "\n";
  };
  // run a: steps 1-6, resumed at step 4 by an older tda that left the replayed records 5, 6
  // (different values) and the validation at 4 in place; a line cut by a kill.
  std::filesystem::create_directories(d.path + "/a");
  write_text(d.path + "/a/config.json", R"({"train": {"total_batch_tokens": 1024}})");
  std::string a = val(0, 9.0);
  for (int s = 1; s <= 6; ++s) a += train(s, 100.0 + s);
  a += val(4, 50.0) + "{\"type\": \"train\", \"st\n";
  a += json({{"type", "resume"}, {"step", 4}, {"superseded", 0}}).dump() + "\n" + val(4, 8.0);
  for (int s = 5; s <= 6; ++s) a += train(s, 10.0 - s);
  write_text(d.path + "/a/metrics.jsonl", a);
  // a sweep with runs c, b (sweep.json's order) and a directory that is not a run
  for (const std::string r : {"b", "c"}) {
    std::filesystem::create_directories(d.path + "/sw/" + r);
    write_text(d.path + "/sw/" + r + "/config.json", R"({"train": {"total_batch_tokens": 512}})");
    std::string m;
    for (int s = 1; s <= 3; ++s) m += train(s, r == "b" ? 4.0 : 2.0 * s);
    write_text(d.path + "/sw/" + r + "/metrics.jsonl", m);
  }
  std::filesystem::create_directories(d.path + "/sw/notes");
  write_text(d.path + "/sw/sweep.json", R"({"runs": [{"name": "c"}, {"name": "b"}]})");

  std::string log;
  const std::string cmd = python() + " " + source_dir() + "/scripts/plot_runs.py " + d.path +
                          "/a " + d.path + "/sw --smooth 0.5 --out " + d.path + "/out";
  REQUIRE(run_command(cmd, &log) == 0);
  INFO(log);
  std::map<std::string, std::map<int, long>> tokens;
  Curves c = read_curves(d.path + "/out/curves.csv", &tokens);
  CHECK(c.size() == 3);
  // a: the steps after the resume are the new ones; the validation at 4 is the replayed one
  std::vector<double> loss;
  for (const auto& [step, v] : c["a"]["loss"]) loss.push_back(v.first);
  CHECK(loss == std::vector<double>{101, 102, 103, 104, 5, 4});
  CHECK(c["a"]["val_loss"].size() == 2);
  CHECK(c["a"]["val_loss"][4].first == 8.0);
  CHECK(tokens["a"][6] == 6 * 1024);
  CHECK(tokens["b"][3] == 3 * 512);
  // TensorBoard's smoothing: s_t = w s_(t-1) + (1 - w) x_t, over 1 - w^t; lr is not smoothed
  double s = 0;
  int t = 0;
  for (const auto& [step, v] : c["a"]["loss"]) {
    s = 0.5 * s + 0.5 * v.first;
    ++t;
    CHECK(v.second == Approx(s / (1 - std::pow(0.5, t))).epsilon(1e-12));
  }
  CHECK(c["b"]["loss"][3].second == Approx(4.0));  // a constant stays constant (debiased)
  CHECK(c["c"]["lr"][2].second == c["c"]["lr"][2].first);
  CHECK(c["c"]["tokens_per_s"][3].first == 1003.0);
  CHECK(c["c"]["grad_norm"][2].first == 1.0);

  if (run_command(python() + " -c 'import matplotlib'") != 0) {
    WARN("matplotlib missing: PNG not checked");
  } else {
    CHECK(is_png(d.path + "/out/curves.png"));
  }
  // bad input: one line naming the directory or option
  CHECK(run_command(cmd + " --smooth 1", &log) != 0);
  CHECK(log.find("--smooth 1.0: must be in [0, 1)") != std::string::npos);
  CHECK(run_command(python() + " " + source_dir() + "/scripts/plot_runs.py " + d.path +
                        "/sw/notes --out " + d.path + "/out",
                    &log) != 0);
  CHECK(log.find("sw/notes: no metrics.jsonl in it or in its sub-directories") !=
        std::string::npos);
}
