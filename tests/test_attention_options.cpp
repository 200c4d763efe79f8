// Each kind declares the attention.<key> options it reads, with their defaults and bounds (its
// registration; the config's attention defaults are built from them, `tda kinds` shows them);
// `--set` of another key is an error naming the kind. The declaration is checked
// against what the variant does: changing every option it does not declare leaves its layer
// (c_attn width, tensors and their init, the forward's output) bit-identical, and changing the
// ones it declares does not.
#include <catch2/catch.hpp>

#include "attention/registry.h"
#include "core/rng.h"
#include "test_attention_util.h"
#include "test_util.h"

namespace tda {
namespace {

// A valid value other than the default for every attention option (all of them at once form a
// valid config: entmax's alpha comes with the bisection solver).
json changed(const std::string& key, const json& def) {
  if (def.is_boolean()) return !def.get<bool>();
  if (def.is_number_integer()) return 2 * def.get<int>() + 1;
  if (def.is_number()) return key == "entmax_alpha" ? 1.25 : 0.5 * def.get<double>();
  const std::map<std::string, std::string> other = {{"gate_shape", "headwise"},
                                                    {"entmax_solver", "bisect"},
                                                    {"lssa_scale_base", "seq_len"},
                                                    {"rela_norm", "rmsnorm"},
                                                    {"tda_heads", "halved"}};
  INFO("attention." << key << ": add a changed value to this test's table");
  REQUIRE(other.count(key));
  return other.at(key);
}

struct Layer {
  int width;
  std::vector<ParamSpec> specs;
  std::vector<float> y;
};

// The kind's layer at a step inside dex's anneal, on fixed inputs (same seed: same proj), its
// tensors moved off their init (dex_W starts at 0, which would hide dex's lambda).
Layer layer(const std::string& kind, const json& options) {
  AttnHarness h(attn_test_config(kind, 128, 2, options), 2, 40, 17);
  h.step = 300;
  Rng rng(3);
  for (auto& p : h.params)
    for (auto& x : p) x += 0.1f * rng.normal();
  h.forward();
  return {h.var->proj_width(), h.specs, h.y};
}

bool same(const Layer& a, const Layer& b) {
  if (a.width != b.width || a.specs.size() != b.specs.size() || a.y != b.y) return false;
  for (size_t i = 0; i < a.specs.size(); ++i) {
    const ParamSpec &p = a.specs[i], &q = b.specs[i];
    if (p.name != q.name || p.shape != q.shape || p.init != q.init || p.a != q.a) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("attention options: a kind reads exactly the options it declares", "[attention]") {
  const json defaults = config_defaults().at("attention");
  for (const auto& kind : attention_kinds()) {
    INFO(kind);
    std::vector<std::string> declared;
    for (const auto& o : attention_registry().at(kind).info.options) {
      CHECK(defaults.at(o.key) == o.def);  // the config's default is the declared one
      CHECK(!o.doc.empty());
      declared.push_back(o.key);
    }
    json others = json::object(), mine = json::object();
    for (auto it = defaults.begin(); it != defaults.end(); ++it) {
      const auto& code = attention_code_keys();
      if (it.key() == "kind" || std::find(code.begin(), code.end(), it.key()) != code.end())
        continue;  // not options of a kind: which code runs it
      const bool is_mine = std::find(declared.begin(), declared.end(), it.key()) != declared.end();
      (is_mine ? mine : others)[it.key()] = changed(it.key(), it.value());
    }
    // entmax: alpha other than 1.5 needs the bisection solver, which it then declares too
    if (!mine.contains("entmax_solver") && mine.contains("entmax_alpha"))
      mine.erase("entmax_alpha");
    const Layer ref = layer(kind, json::object());
    INFO("undeclared options changed: " << others.dump());
    CHECK(same(layer(kind, others), ref));
    if (!mine.empty()) {
      INFO("declared options changed: " << mine.dump());
      CHECK(!same(layer(kind, mine), ref));
    }
  }
}

TEST_CASE("attention options: --set of an option the kind does not read names the kind",
          "[attention][cli]") {
  std::string out;
  const std::string train = "train --config " + source_dir() +
                            "/configs/tiny/softmax.json --steps 0 --out /tmp/tda_opt_test ";
  CHECK(run_tda(train + "--set attention.kappa=2", &out) != 0);
  CHECK_THAT(out, Catch::Contains("--set attention.kappa: attention.kind 'softmax' has no option "
                                  "'kappa' (its options: none; 'kappa' is read by: tda, tra"));
  CHECK(run_tda(train + "--set attention.kind=entmax --set attention.gate_shape=headwise", &out) !=
        0);
  CHECK_THAT(out, Catch::Contains("its options: entmax_solver, entmax_iters, entmax_alpha; "
                                  "'gate_shape' is read by: gated_softmax"));
  // `tda kinds --json` lists each kind's options with their documentation
  REQUIRE(run_tda("kinds --json", &out) == 0);
  const json k = json::parse(out);
  for (const auto& row : k)
    if (row.at("name") == "tda") {
      REQUIRE(row.at("options").size() == 7);
      CHECK(row.at("options")[0].at("key") == "beta");
      CHECK(row.at("options")[0].at("default") == 1.0);
      CHECK(!row.at("options")[0].at("doc").get<std::string>().empty());
    }
}

}  // namespace tda

namespace tda {

// The attention defaults are exactly the declared options (plus the kind and the implementation
// that runs it: impl, fwd_block_rows, fwd_block_keys, bwd_stages, deterministic, tuning), so a
// kind's new option needs no edit of the config code; their bounds are enforced with the config's
// messages.
TEST_CASE("attention options: the config's attention defaults and bounds are the declared ones",
          "[attention][config]") {
  json want = {{"kind", "softmax"},   {"impl", "auto"},  {"fwd_block_rows", 0},
               {"fwd_block_keys", 0}, {"bwd_stages", 0}, {"deterministic", true},
               {"tuning", "auto"}};
  CHECK(attention_code_keys() == std::vector<std::string>{"impl", "fwd_block_rows",
                                                          "fwd_block_keys", "bwd_stages",
                                                          "deterministic", "tuning"});
  for (const auto& [name, kind] : attention_registry())
    for (const auto& o : kind.info.options) want[o.key] = o.def;
  CHECK(config_defaults().at("attention") == want);
  // a declared bound (entmax's alpha in (1, 2]) and a declared default of a non-softmax kind
  CHECK_THROWS_WITH(parse_config("{}", {"attention.entmax_alpha=2.5"}, "t"),
                    Catch::Contains("'attention.entmax_alpha' must be in (1, 2], got 2.5"));
  CHECK_THROWS_WITH(parse_config("{}", {"attention.fwd_block_rows=96"}, "t"),
                    Catch::Contains("attention.fwd_block_rows 96 must be 0 (default), 64 or 128"));
  CHECK(parse_config("{}", {"attention.fwd_block_rows=128"}, "t").attention.fwd_block_rows == 128);
  CHECK_THROWS_WITH(parse_config("{}", {"attention.fwd_block_keys=32"}, "t"),
                    Catch::Contains("attention.fwd_block_keys 32 must be 0 (default), 64 or 128"));
  CHECK(parse_config("{}", {"attention.fwd_block_keys=128"}, "t").attention.fwd_block_keys == 128);
  CHECK_THROWS_WITH(
      parse_config("{}", {"attention.fwd_block_rows=128", "attention.fwd_block_keys=128"}, "t"),
      Catch::Contains("fwd_block_rows 128 with fwd_block_keys 128: that forward shape is not "
                      "built"));
  CHECK_THROWS_WITH(parse_config("{}", {"attention.bwd_stages=3"}, "t"),
                    Catch::Contains("attention.bwd_stages 3 must be 0 (default), 1 or 2"));
  CHECK(parse_config("{}", {"attention.bwd_stages=2"}, "t").attention.bwd_stages == 2);
  CHECK(!parse_config("{}", {"attention.deterministic=false"}, "t").attention.deterministic);
  CHECK_THROWS_WITH(parse_config("{}", {"attention.deterministic=2"}, "t"),
                    Catch::Contains("attention.deterministic"));
  CHECK(parse_config("{}", {"attention.tuning=t.json"}, "t").attention.tuning == "t.json");
  CHECK_THROWS_WITH(parse_config("{}", {"attention.tuning="}, "t"),
                    Catch::Contains("attention.tuning must be auto, none or"));
  const Config c = parse_config("{}", {"attention.kind=dex"}, "t");
  CHECK(c.attention.option<int>("dex_anneal_steps") == 715);
  CHECK(c.attention.option<int>("dex_anneal_steps") == 715);
}

}  // namespace tda
