// The DataLoader's sample stream: batches span shards (and epochs), every sample is seen once
// per epoch, ranks split the stream exactly, and shards smaller than a batch train (they made
// next() loop forever, deaf to SIGINT/SIGTERM).
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "core/error.h"
#include "data/loader.h"
#include "data/shard.h"
#include "test_run_util.h"
#include "test_util.h"

using namespace tda;

namespace {
constexpr int kT = 4;

// Shard f holds `samples` samples of kT+1 tokens (plus a spare token); token i of shard f is
// 100*f + i, so a batch row names its sample by its first token.
void write_test_shards(const std::string& dir, const std::vector<int>& samples) {
  for (size_t f = 0; f < samples.size(); ++f) {
    std::vector<uint16_t> toks(size_t(samples[f] * kT + 2));
    for (size_t i = 0; i < toks.size(); ++i) toks[i] = uint16_t(100 * f + i);
    write_shard(dir + "/s" + std::to_string(f) + ".bin", toks.data(), toks.size());
  }
}

// The first tokens of the next `batches` micro-batches of one rank.
std::vector<int> stream(DataLoader& dl, int B, int batches) {
  std::vector<int> r;
  std::vector<int32_t> in(size_t(B) * kT), tg(in.size());
  for (int i = 0; i < batches; ++i) {
    dl.next(in.data(), tg.data());
    for (int b = 0; b < B; ++b) {
      REQUIRE(tg[size_t(b) * kT] == in[size_t(b) * kT] + 1);  // targets are inputs shifted by one
      r.push_back(in[size_t(b) * kT]);
    }
  }
  return r;
}
}  // namespace

TEST_CASE("loader: batches span shards so every sample is seen once per epoch", "[data]") {
  TempDir d;
  write_test_shards(d.path, {3, 2, 4});  // 9 samples; the old loader dropped each shard's tail
  const std::string pat = d.path + "/s*.bin";
  std::set<int> all;
  for (int f = 0; f < 3; ++f)
    for (int s = 0; s < std::vector<int>{3, 2, 4}[size_t(f)]; ++s) all.insert(100 * f + s * kT);
  for (bool shuffle : {false, true}) {
    DataLoader dl(pat, 2, kT, 1000, shuffle, 7);
    REQUIRE(dl.samples_per_epoch() == 9);
    std::vector<int> s = stream(dl, 2, 9);  // 18 samples: exactly two epochs
    INFO("shuffle " << shuffle);
    CHECK(std::set<int>(s.begin(), s.begin() + 9) == all);
    CHECK(std::set<int>(s.begin() + 9, s.end()) == all);
    // Resuming from a saved position continues the same stream.
    DataLoader a(pat, 2, kT, 1000, shuffle, 7), b(pat, 2, kT, 1000, shuffle, 7);
    stream(a, 2, 3);
    b.set_position(a.position());
    CHECK(stream(a, 2, 5) == stream(b, 2, 5));
  }
}

TEST_CASE("loader: W ranks with micro-batch B read the stream of one rank with W*B", "[data]") {
  TempDir d;
  write_test_shards(d.path, {7, 4, 9, 5});  // global batches of 6 straddle every boundary
  const std::string pat = d.path + "/s*.bin";
  DataLoader one(pat, 6, kT, 1000, true, 3);
  const std::vector<int> want = stream(one, 6, 5);
  std::vector<std::vector<int>> per_rank;
  for (int r = 0; r < 3; ++r) {
    DataLoader dl(pat, 2, kT, 1000, true, 3, r, 3);
    per_rank.push_back(stream(dl, 2, 5));
  }
  std::vector<int> merged;
  for (int i = 0; i < 5; ++i)
    for (int r = 0; r < 3; ++r)
      merged.insert(merged.end(), per_rank[size_t(r)].begin() + 2 * i,
                    per_rank[size_t(r)].begin() + 2 * i + 2);
  CHECK(merged == want);
}

TEST_CASE("loader: a saved position that does not fit the shards is an error", "[data][badinput]") {
  TempDir d;
  write_test_shards(d.path, {3, 2});
  DataLoader dl(d.path + "/s*.bin", 1, kT, 1000, false, 1);
  CHECK_THROWS_WITH(dl.set_position({0, 5, 0}), Catch::Contains("does not fit the 2 shard(s)"));
  CHECK_THROWS_WITH(dl.set_position({0, 1, 3}),
                    Catch::Contains("loader position (epoch 0, shard 1, sample 3)"));
  CHECK_NOTHROW(dl.set_position({0, 1, 2}));  // the end of shard 1: the next batch starts shard 0
}

TEST_CASE("train: shards each smaller than one batch train and finish (no hang)",
          "[data][training]") {
  TempDir d;
  std::vector<std::string> args = byte_corpus(d.path);  // val shard and a 256-token vocabulary
  // The tiny config's batch is 8 samples of 129 tokens; each shard holds 3 (like
  // `tda tokenize --shard-tokens 1000` on the bundled corpus: 7 per shard), 5 shards in all.
  for (int f = 0; f < 5; ++f) {
    std::vector<uint16_t> toks(3 * 128 + 1);
    for (size_t i = 0; i < toks.size(); ++i) toks[i] = uint16_t((i * 7 + size_t(f) * 13) % 256);
    write_shard(d.path + "/small_" + std::to_string(f) + ".bin", toks.data(), toks.size());
  }
  args.insert(args.begin(),
              {"train", "--config", source_dir() + "/configs/tiny/softmax.json", "--out",
               d.path + "/run", "--steps", "3", "--set", "train.val_every=0"});
  args.insert(args.end(), {"--set", "data.train=" + d.path + "/small_*.bin"});  // later wins
  TdaProcess p(args, d.path + "/log.txt");
  // Three tiny steps take well under a second; the old loader never returned.
  const bool finished = p.wait_for(60);
  INFO(p.output());
  REQUIRE(finished);
  CHECK(p.exited_with(0));
}
