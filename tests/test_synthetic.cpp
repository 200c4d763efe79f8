// The synthetic retrieval tasks (data/synthetic.h): every counted target is the answer the task
// promises (and nothing else counts), sequences are a function of (seed, split, index) so ranks
// and resumes see exactly the single-rank stream, validation never repeats a training sequence,
// and a config that cannot hold its task is refused with one line naming the key.
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "backend/ops.h"
#include "core/config.h"
#include "core/error.h"
#include "data/synthetic.h"

using namespace tda;

namespace {

SyntheticConfig task(const std::string& name, int pairs, int queries = 0, int distractors = 0,
                     int vocab = 64) {
  return SyntheticConfig{name, vocab, pairs, queries, distractors};
}

std::vector<int32_t> batch(BatchSource& s, int B, int T, std::vector<int32_t>* targets = nullptr) {
  std::vector<int32_t> in(size_t(B) * T), tg(in.size());
  s.next(in.data(), tg.data());
  if (targets) *targets = tg;
  in.insert(in.end(), tg.begin(), tg.end());  // a batch is its inputs and its targets
  return in;
}

}  // namespace

TEST_CASE("synthetic mqar: each counted target is the value of its key in the context",
          "[data][synthetic]") {
  for (const bool noisy : {false, true}) {
    INFO("noisy " << noisy);
    const SyntheticConfig c = noisy ? task("mqar_noisy", 6, 4, 3) : task("mqar", 6, 4);
    const SyntheticTask t(c);
    const int T = 40, n = 6;
    std::vector<int32_t> in(T), tg(T);
    for (uint64_t i = 0; i < 50; ++i) {
      t.generate(9, SyntheticSplit::kTrain, i, T, in.data(), tg.data());
      std::map<int, int> kv;  // the context: keys [1, V/2) at even positions, values [V/2, V)
      for (int p = 0; p < 2 * n; p += 2) {
        REQUIRE((in[p] >= 1 && in[p] < 32 && in[p + 1] >= 32 && in[p + 1] < 64));
        REQUIRE(kv.emplace(in[p], in[p + 1]).second);  // distinct keys
        CHECK(tg[p] == kIgnoreTarget);
        CHECK(tg[p + 1] == kIgnoreTarget);
      }
      int answers = 0, distractors = 0;
      std::set<int> asked;
      for (int p = 2 * n; p < T; ++p) {
        if (tg[p] != kIgnoreTarget) {
          ++answers;
          REQUIRE(kv.count(in[p]));
          CHECK(tg[p] == kv.at(in[p]));
          CHECK(asked.insert(in[p]).second);  // each key is asked once
        } else if (in[p] != 0) {
          ++distractors;
          CHECK(kv.count(in[p]) == 0);  // a distractor key has no pair in the context
          CHECK((in[p] >= 1 && in[p] < 32));
        }
        if ((p - 2 * n) % 2 == 1) CHECK(in[p] == 0);  // each query slot ends in filler
      }
      CHECK(answers == 4);
      CHECK(distractors == (noisy ? 3 : 0));
    }
  }
}

TEST_CASE("synthetic needles: each query's target is its needle's value", "[data][synthetic]") {
  const SyntheticTask t(task("needles", 3, 2, 0, 64));  // K = 15 keys, filler [32, 64)
  const int T = 60;
  std::vector<int32_t> in(T), tg(T);
  for (uint64_t i = 0; i < 50; ++i) {
    t.generate(4, SyntheticSplit::kVal, i, T, in.data(), tg.data());
    std::map<int, int> needles;
    const int haystack = T - 3 * 2;
    for (int p = 0; p < haystack; ++p) {
      CHECK(tg[p] == kIgnoreTarget);
      if (in[p] == 0) {  // a needle: M, key, value
        REQUIRE(p + 2 < haystack);
        REQUIRE((in[p + 1] >= 2 && in[p + 1] < 17 && in[p + 2] >= 17 && in[p + 2] < 32));
        REQUIRE(needles.emplace(in[p + 1], in[p + 2]).second);
        p += 2;
      } else {
        CHECK(in[p] >= 32);  // filler only
      }
    }
    CHECK(needles.size() == 3);
    for (int p = haystack; p < T; p += 3) {
      CHECK(in[p] == 1);  // Q
      REQUIRE(needles.count(in[p + 1]));
      CHECK(tg[p + 1] == needles.at(in[p + 1]));
      CHECK(in[p + 2] == tg[p + 1]);  // the answer follows, as in the passkey prompt
      CHECK(tg[p] == kIgnoreTarget);
      CHECK(tg[p + 2] == kIgnoreTarget);
    }
  }
}

TEST_CASE("synthetic loader: ranks, resumes and validation see the one stream they should",
          "[data][synthetic]") {
  const SyntheticConfig c = task("mqar", 4);
  const int T = 24;
  // W ranks of B read what one rank of W*B reads.
  SyntheticLoader one(c, SyntheticSplit::kTrain, 6, T, 11);
  SyntheticLoader r0(c, SyntheticSplit::kTrain, 3, T, 11, 0, 2),
      r1(c, SyntheticSplit::kTrain, 3, T, 11, 1, 2);
  for (int step = 0; step < 3; ++step) {
    std::vector<int32_t> t_one, t0, t1;
    auto b_one = batch(one, 6, T, &t_one), b0 = batch(r0, 3, T, &t0), b1 = batch(r1, 3, T, &t1);
    std::vector<int32_t> in0(b0.begin(), b0.begin() + 3 * T), in1(b1.begin(), b1.begin() + 3 * T);
    in0.insert(in0.end(), in1.begin(), in1.end());
    t0.insert(t0.end(), t1.begin(), t1.end());
    CHECK(std::vector<int32_t>(b_one.begin(), b_one.begin() + 6 * T) == in0);
    CHECK(t_one == t0);
  }
  // A saved position resumes the same stream; the same seed gives the same batches.
  SyntheticLoader a(c, SyntheticSplit::kTrain, 2, T, 11), b(c, SyntheticSplit::kTrain, 2, T, 11);
  batch(a, 2, T);
  batch(a, 2, T);
  b.set_position(a.position());
  CHECK(batch(a, 2, T) == batch(b, 2, T));
  a.reset();
  SyntheticLoader fresh(c, SyntheticSplit::kTrain, 2, T, 11);
  CHECK(batch(a, 2, T) == batch(fresh, 2, T));
  // Another seed, and the validation stream, give other sequences: none of 200 is shared.
  std::set<std::vector<int32_t>> train;
  SyntheticLoader tr(c, SyntheticSplit::kTrain, 1, T, 11), va(c, SyntheticSplit::kVal, 1, T, 11),
      other(c, SyntheticSplit::kTrain, 1, T, 12);
  for (int i = 0; i < 200; ++i) train.insert(batch(tr, 1, T));
  int shared = 0;
  for (int i = 0; i < 200; ++i)
    shared += int(train.count(batch(va, 1, T)) + train.count(batch(other, 1, T)));
  CHECK(shared == 0);
  // A shard loader's position is no synthetic task's.
  CHECK_THROWS_WITH(a.set_position(LoaderPosition{1, 0, 0}),
                    Catch::Contains("not a synthetic task's"));
}

TEST_CASE("data.synthetic: a task that does not fit is refused naming the key",
          "[data][synthetic]") {
  const std::string base =
      R"({"model": {"vocab_size": 256, "real_vocab_size": 200, "seq_len": 64},
          "data": {"synthetic": {"task": "mqar", "vocab": 128, "pairs": 8}}})";
  CHECK(parse_config(base, {}, "t").data.synthetic.pairs == 8);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"data.synthetic.task=mqr", "'data.synthetic.task' must be \"\" (shards), \"mqar\""},
      {"data.synthetic.vocab=300",
       "'data.synthetic.vocab' must be in [8, model.real_vocab_size = 200]"},
      {"data.synthetic.pairs=64", "'data.synthetic.pairs' must be in [1, 63]"},
      {"data.synthetic.queries=9",
       "'data.synthetic.queries' must be in [0, data.synthetic.pairs = 8]"},
      {"data.synthetic.distractors=2", "'data.synthetic.distractors' must be 0 unless"},
      {"data.synthetic.task=mqar_noisy", "'data.synthetic.distractors' must be >= 1"},
      {"model.seq_len=16", "needs model.seq_len >= 32, got 16"},
      {"data.synthetic.pairs=true", "'data.synthetic.pairs' must be integer"},
      {"data.synthetic.tsk=mqar", "unknown config key 'data.synthetic.tsk'"},
  };
  for (const auto& [set, message] : bad) {
    INFO(set);
    CHECK_THROWS_WITH(parse_config(base, {set}, "t"), Catch::Contains(message));
  }
}
