// Each registered kind's tiny config trains on the bundled corpus: 50 steps of 1,024 tokens (the
// cosine schedule over those 50) take validation loss from ~ln(50257) = 10.8 to below 7.0.
// Measured at 50 steps (scripts/bench/tiny_all_kinds.sh 50): softmax 6.25, gated_softmax 6.24,
// ssmax 6.19, entmax 6.22, lssa 6.22, rela 6.53, diff_softmax 6.67, dex 6.23, diff_rela 6.56,
// tra 6.37, tda 6.53. The bar is deliberately loose so that the kinds that start slower pass
// reliably; a run with a NaN, a wrong gradient sign or a dead optimizer stays above 9. (It was
// 100 steps, twice the CI time for a bar every kind clears by 0.3 at 50.) softmax is checked at
// steps 100 and 200 by test_training.cpp, so it is not trained a second time here (reported as
// skipped).
#include <catch2/catch.hpp>

#include "core/config.h"
#include "core/fs.h"
#include "test_kinds.h"
#include "test_util.h"
#include "train/trainer.h"

using namespace tda;

namespace {
void train_kind(const std::string& kind) {
  if (kind == "softmax") TDA_SKIP("softmax: trained by test_training.cpp");
  REQUIRE(path_exists(source_dir() + "/data/tinyshakespeare/tiny_shakespeare_train.bin"));
  TempDir dir;
  Config cfg = load_kind_config("tiny", kind,
                                {"train.max_steps=50", "train.val_every=50", "train.log_every=50"});
  TrainOptions to;
  to.out_dir = dir.path;
  Trainer t(cfg, to);
  REQUIRE(t.run() == 0);
  REQUIRE(t.val_history().size() == 2);
  INFO(kind << ": val loss " << t.val_history().front() << " -> " << t.val_history().back());
  CHECK(t.val_history().front() > 10.0);
  CHECK(t.val_history().back() < 7.0);
}
}  // namespace

TDA_PER_KIND_TEST("tiny {kind} config trains below 7.0 validation loss", "[training][slow][kinds]",
                  train_kind);
