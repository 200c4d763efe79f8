// Config loading: base inheritance, overrides, strict validation with key paths.
#include <catch2/catch.hpp>
#include <fstream>

#include "core/config.h"
#include "core/error.h"
#include "test_util.h"

using namespace tda;

TEST_CASE("config: base inheritance and --set overrides", "[config]") {
  TempDir dir;
  write_text(dir.path + "/base.json", R"({"model": {"n_layer": 2, "d_model": 128, "n_head": 2,
      "seq_len": 64}, "train": {"micro_batch": 2, "total_batch_tokens": 256}})");
  write_text(dir.path + "/child.json", R"({"base": "base.json", "model": {"n_layer": 3}})");
  Config c = load_config(dir.path + "/child.json", {"optim.lr=0.003", "attention.kind=softmax"});
  CHECK(c.model.n_layer == 3);    // child wins
  CHECK(c.model.d_model == 128);  // inherited
  CHECK(c.optim.lr == Approx(0.003));
  CHECK(c.optim.beta2 == Approx(0.95));  // default
  CHECK(c.raw["model"]["n_layer"] == 3);
}

TEST_CASE("config: unknown key and wrong type name the key path", "[config][badinput]") {
  TempDir dir;
  write_text(dir.path + "/a.json", R"({"model": {"n_layers": 2}})");
  CHECK_THROWS_WITH(load_config(dir.path + "/a.json"),
                    Catch::Contains("unknown config key 'model.n_layers'"));
  write_text(dir.path + "/b.json", R"({"optim": {"lr": "fast"}})");
  CHECK_THROWS_WITH(load_config(dir.path + "/b.json"), Catch::Contains("'optim.lr' must be number"));
  write_text(dir.path + "/c.json", R"({"model": {"n_layer": 2.5}})");
  CHECK_THROWS_WITH(load_config(dir.path + "/c.json"),
                    Catch::Contains("'model.n_layer' must be integer"));
  CHECK_THROWS_WITH(load_config(dir.path + "/c.json", {"model.n_layer=2", "train.bogus=1"}),
                    Catch::Contains("unknown config key 'train.bogus'"));
}
