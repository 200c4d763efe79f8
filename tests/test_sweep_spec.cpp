// Sweep specs and the shipped configs (docs/sweeps.md): a spec is read strictly (unknown keys,
// wrong types, duplicate or forward init_from names, a run whose config does not resolve: one
// line naming it); configs/sweeps/paper.json is the paper's study (each main run is exactly
// configs/gpt2_162m/<kind>.json, the p and beta studies, the seven extensions from their own
// kind's run); mini.json trains all eleven kinds; no two configs share a default run directory
// and every extension config starts from where its pretraining config writes.
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <set>

#include "core/config.h"
#include "core/error.h"
#include "sweep/evals.h"
#include "sweep/spec.h"
#include "test_util.h"

using namespace tda;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kKinds = {"softmax",   "gated_softmax", "ssmax",        "entmax",
                                         "lssa",      "rela",          "diff_softmax", "dex",
                                         "diff_rela", "tra",           "tda"};

std::string error_of(const std::string& spec_text) {
  TempDir d;
  write_text(d.path + "/s.json", spec_text);
  try {
    load_sweep(d.path + "/s.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::map<std::string, const SweepRun*> by_name(const Sweep& s) {
  std::map<std::string, const SweepRun*> m;
  for (const auto& r : s.runs) m[r.name] = &r;
  return m;
}

}  // namespace

TEST_CASE("sweep spec: bad specs are one-line errors naming the key or run", "[sweep][config]") {
  const std::string cfg = "\"config\": \"" + source_dir() + "/configs/tiny/base.json\"";
  const std::string run = "{\"name\": \"a\"}";
  CHECK(error_of("{" + cfg + ", \"runs\": [" + run + "]}").empty());  // the control
  CHECK(error_of("{" + cfg + ", \"runs\": [" + run + "]}" + std::string("\0", 1) + "junk")
            .find("is not valid JSON: a NUL byte at offset") != std::string::npos);
  CHECK(error_of("{" + cfg + ", \"runs\": [" + run + "], \"evals\": {}}")
            .find("unknown config key 'evals'") != std::string::npos);
  CHECK(error_of("{" + cfg + ", \"runs\": [" + run + "], \"eval\": {\"mc\": {\"taks\": []}}}")
            .find("unknown config key 'eval.mc.taks'") != std::string::npos);
  CHECK(error_of("{" + cfg + ", \"runs\": [{\"name\": \"a\", \"sets\": {}}]}")
            .find("runs[0]: unknown config key 'sets'") != std::string::npos);
  CHECK(error_of("{" + cfg + ", \"runs\": [" + run +
                 "], \"eval\": {\"diag\": {\"sequences\": \"many\"}}}")
            .find("'eval.diag.sequences' must be integer") != std::string::npos);
  CHECK(error_of("{" + cfg + ", \"runs\": [" + run +
                 "], \"eval\": {\"mc\": {\"tasks\": [\"lambada\"]}}}")
            .find("eval.mc.tasks: unknown task \"lambada\"") != std::string::npos);
  CHECK(error_of("{" + cfg + ", \"runs\": [" + run +
                 "], \"eval\": {\"passkey\": {\"needles\": [3]}}}")
            .find("eval.passkey.needles: 3 is not 1, 2 or 4") != std::string::npos);
  CHECK(error_of("{" + cfg + ", \"runs\": [" + run + ", " + run + "]}")
            .find("runs[1]: two runs are named \"a\"") != std::string::npos);
  CHECK(error_of("{" + cfg + ", \"runs\": [{\"name\": \"b\", \"init_from\": \"a\"}, " + run + "]}")
            .find("init_from \"a\" is not a run listed before it") != std::string::npos);
  CHECK(error_of("{" + cfg + ", \"runs\": [{\"name\": \"../x\"}]}").find("plain directory name") !=
        std::string::npos);
  CHECK(error_of("{\"runs\": [" + run + "]}").find("no config") != std::string::npos);
  CHECK(error_of("{" + cfg + ", \"runs\": []}").find("'runs' must be a non-empty list") !=
        std::string::npos);
  // a run whose config does not resolve fails before anything trains, naming the run and key
  CHECK(error_of("{" + cfg + ", \"runs\": [{\"name\": \"a\", \"set\": {\"attention.kidn\": 1}}]}")
            .find("sweep: run a: ") != std::string::npos);
  CHECK(error_of("{" + cfg + ", \"runs\": [{\"name\": \"a\", \"set\": {\"attention.kidn\": 1}}]}")
            .find("unknown config key 'attention.kidn'") != std::string::npos);
  CHECK(error_of("{" + cfg + ", \"set\": {\"train.max_steps\": 0}, \"runs\": [" + run + "]}")
            .find("'train.max_steps' must be > 0") != std::string::npos);
}

TEST_CASE("sweep spec: overrides apply in order: config, spec set, run set, command line",
          "[sweep][config]") {
  TempDir d;
  write_text(d.path + "/s.json",
             "{\"config\": \"" + source_dir() +
                 "/configs/tiny/base.json\", \"set\": {\"train.max_steps\": 7, \"optim.lr\": 0.01},"
                 " \"runs\": [{\"name\": \"a\", \"set\": {\"optim.lr\": 0.02, \"attention.kind\": "
                 "\"tda\"}}]}");
  const Sweep s = load_sweep(d.path + "/s.json");
  CHECK(s.name == "s");  // the file's name without one in the spec
  CHECK(s.runs[0].cfg.train.max_steps == 7);
  CHECK(s.runs[0].cfg.optim.lr == 0.02);
  CHECK(s.runs[0].cfg.attention.kind == "tda");
  CHECK(s.runs[0].group == "main");
  SweepOverrides o;
  o.sets = {"optim.lr=0.03"};
  o.config = source_dir() + "/configs/tiny/softmax.json";
  const Sweep t = load_sweep(d.path + "/s.json", o);
  CHECK(t.runs[0].cfg.optim.lr == 0.03);
  CHECK(t.runs[0].config == o.config);
}

TEST_CASE("configs/sweeps/paper.json is the paper's study", "[sweep][config]") {
  const std::string dir = source_dir() + "/configs/";
  const Sweep s = load_sweep(dir + "sweeps/paper.json");
  const auto runs = by_name(s);
  CHECK(s.name == "paper");
  // Table 1: the eleven kinds, each exactly its own config file of the 162M recipe
  std::set<std::string> main_kinds;
  for (const auto& r : s.runs)
    if (r.group == "main") main_kinds.insert(r.cfg.attention.kind);
  CHECK(main_kinds == std::set<std::string>(kKinds.begin(), kKinds.end()));
  for (const auto& k : kKinds) {
    INFO(k);
    REQUIRE(runs.count(k));
    CHECK(runs.at(k)->group == "main");
    CHECK(runs.at(k)->cfg.raw == load_config(dir + "gpt2_162m/" + k + ".json").raw);
  }
  // the p and beta studies: TDA at beta 1 with p 1, 3, 5; at p 2 with beta 0.8, 0.5
  std::set<double> p, beta;
  for (const auto& r : s.runs) {
    if (r.group == "p") {
      CHECK(r.cfg.attention.kind == "tda");
      CHECK(r.cfg.attention.option<double>("beta") == 1.0);
      p.insert(r.cfg.attention.option<int>("power"));
    }
    if (r.group == "beta") {
      CHECK(r.cfg.attention.option<int>("power") == 2);
      beta.insert(r.cfg.attention.option<double>("beta"));
    }
  }
  CHECK(p == std::set<double>{1, 3, 5});
  CHECK(beta == std::set<double>{0.8, 0.5});
  // the extensions: Table 2's seven kinds, each from its own kind's run of this sweep
  std::set<std::string> ext;
  for (const auto& r : s.runs) {
    if (r.group != "extension") continue;
    INFO(r.name);
    ext.insert(r.cfg.attention.kind);
    CHECK(r.init_from == r.cfg.attention.kind);
    CHECK(r.cfg.raw ==
          load_config(dir + "gpt2_162m/extend_4096_" + r.cfg.attention.kind + ".json").raw);
    CHECK(r.cfg.model.seq_len == 4096);
    CHECK(r.cfg.train.max_steps == 500);
  }
  CHECK(ext ==
        std::set<std::string>{"softmax", "ssmax", "diff_softmax", "entmax", "rela", "tra", "tda"});
  // the 5-epoch schedule replaces the default config: pretraining runs change, extensions not
  SweepOverrides o;
  o.config = dir + "gpt2_162m/base_5epochs.json";
  const Sweep five_sweep = load_sweep(dir + "sweeps/paper.json", o);  // by_name points into it
  const auto five = by_name(five_sweep);
  CHECK(five.at("tda")->cfg.train.max_steps == 190730);  // 5 x 38,146
  CHECK(five.at("tda_p3")->cfg.train.max_steps == 190730);
  CHECK(five.at("extend_4096_tda")->cfg.train.max_steps == 500);
  // the protocol: the six tasks, diagnostics past the trained length, 1/2/4 needles at
  // 500..4000 tokens, the four SCROLLS tasks on the extended models
  CHECK(s.eval["mc"]["tasks"].size() == 6);
  CHECK(s.eval["passkey"]["needles"] == json({1, 2, 4}));
  CHECK(s.eval["passkey"]["lengths"].front() == 500);
  CHECK(s.eval["passkey"]["lengths"].back() == 4000);
  CHECK(s.eval["scrolls"]["tasks"].size() == 4);
  CHECK(eval_applies(s.eval["scrolls"], "extension"));
  CHECK(!eval_applies(s.eval["scrolls"], "main"));
}

TEST_CASE("configs/sweeps/mini.json trains all eleven kinds and extends two", "[sweep][config]") {
  const Sweep s = load_sweep(source_dir() + "/configs/sweeps/mini.json");
  std::set<std::string> kinds;
  for (const auto& r : s.runs) {
    INFO(r.name);
    if (r.group == "main") {
      kinds.insert(r.cfg.attention.kind);
      CHECK(r.name == r.cfg.attention.kind);
      CHECK(r.cfg.model.head_dim() == 64);  // TRA/TDA's threshold assumes d = 64 (design.md)
      CHECK(r.cfg.model.real_vocab_size == 50257);  // the GPT-2 tokenizer: the text evaluations
      CHECK(r.cfg.data.train.find("enwiki") != std::string::npos);
    } else {
      CHECK(r.group == "extension");
      REQUIRE(!r.init_from.empty());
      const auto& from = *std::find_if(s.runs.begin(), s.runs.end(),
                                       [&](const SweepRun& x) { return x.name == r.init_from; });
      CHECK(r.cfg.raw["attention"] == from.cfg.raw["attention"]);
      CHECK(r.cfg.model.seq_len == 4 * from.cfg.model.seq_len);
      CHECK(r.cfg.model.rope_ntk_factor == 4.0);
    }
  }
  CHECK(kinds == std::set<std::string>(kKinds.begin(), kKinds.end()));
  // the spec says how its data is made
  CHECK(s.raw["about"].dump().find("scripts/prepare_enwiki_sample.py") != std::string::npos);
}

TEST_CASE("no two configs share a default run directory, extensions start from theirs",
          "[config]") {
  CHECK(default_run_dir("configs/tiny/tda.json") == "runs/tiny/tda");
  CHECK(default_run_dir("configs/gpt2_162m/tda.json") == "runs/gpt2_162m/tda");
  CHECK(default_run_dir("/abs/configs/d12_bench.json") == "runs/d12_bench");
  CHECK(default_run_dir("mine.json") == "runs/mine");
  CHECK(default_run_dir("./mine.json") == "runs/mine");
  std::map<std::string, std::string> owner;
  for (const auto& e : fs::recursive_directory_iterator(source_dir() + "/configs")) {
    const std::string p = e.path().string();
    if (e.path().extension() != ".json" || p.find("/sweeps/") != std::string::npos) continue;
    const std::string rel = p.substr(source_dir().size() + 1);
    const std::string run = default_run_dir(rel);
    const auto [at, fresh] = owner.insert({run, rel});
    INFO(rel << " and " << at->second << " both write " << run);
    CHECK(fresh);
    const Config c = load_config(p);
    if (c.train.init_from.empty()) continue;
    // the run it starts from is where the same folder's config of its kind writes
    const std::string from = rel.substr(0, rel.rfind('/') + 1) + c.attention.kind + ".json";
    CHECK(c.train.init_from == default_run_dir(from));
    CHECK(load_config(source_dir() + "/" + from).raw["attention"] == c.raw["attention"]);
  }
  CHECK(owner.size() > 25);
}
