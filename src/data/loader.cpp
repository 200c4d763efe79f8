#include "data/loader.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/fs.h"
#include "core/rng.h"
#include "data/shard.h"
#include "data/synthetic.h"

namespace tda {

std::unique_ptr<BatchSource> make_batch_source(const Config& cfg, bool val, int rank, int world) {
  const auto& t = cfg.train;
  const auto& m = cfg.model;
  if (!cfg.data.synthetic.task.empty())
    return std::make_unique<SyntheticLoader>(cfg.data.synthetic,
                                             val ? SyntheticSplit::kVal : SyntheticSplit::kTrain,
                                             t.micro_batch, m.seq_len, t.seed, rank, world);
  return std::make_unique<DataLoader>(val ? cfg.data.val : cfg.data.train, t.micro_batch, m.seq_len,
                                      m.real_vocab_size, !val && cfg.data.shuffle, t.seed, rank,
                                      world);
}

DataLoader::DataLoader(const std::string& pattern, int B, int T, int vocab_size, bool shuffle,
                       uint64_t seed, int rank, int world)
    : B_(B), T_(T), vocab_(vocab_size), rank_(rank), world_(world), shuffle_(shuffle), seed_(seed) {
  files_ = glob_paths(pattern, "data");
  // Check every header up front so a bad or too-small data set is reported at start, not
  // mid-run; token ids are checked when a shard is loaded.
  int64_t total = 0;
  for (const auto& f : files_) {
    size_t n = read_shard_header(f);
    int64_t s = n > 0 ? int64_t(n - 1) / T_ : 0;
    shard_samples_.push_back(s);
    total += s;
  }
  TDA_CHECK(total >= int64_t(B_) * world_,
            "data: '" + pattern + "' holds " + std::to_string(total) + " samples of " +
                std::to_string(T_ + 1) + " tokens, fewer than one batch (" +
                std::to_string(int64_t(B_) * world_) + ")");
  reset();
}

int64_t DataLoader::samples_per_epoch() const {
  return std::accumulate(shard_samples_.begin(), shard_samples_.end(), int64_t(0));
}

void DataLoader::reset() {
  set_position(LoaderPosition{});
}

void DataLoader::set_position(const LoaderPosition& p) {
  // A checkpoint's position indexes this file list: it must fit (data.train may have changed).
  const bool fits =
      p.epoch >= 0 && p.shard >= 0 && p.shard < int64_t(files_.size()) && p.cursor >= 0;
  pos_ = p;
  ordered_epoch_ = loaded_epoch_ = loaded_shard_ = -1;
  if (fits) order_shards();
  TDA_CHECK(fits && p.cursor <= shard_samples_[size_t(shard_file())],
            "data: loader position (epoch " + std::to_string(p.epoch) + ", shard " +
                std::to_string(p.shard) + ", sample " + std::to_string(p.cursor) +
                ") does not fit the " + std::to_string(files_.size()) +
                " shard(s) matched by the data pattern (were the shards changed?)");
}

void DataLoader::order_shards() {
  if (ordered_epoch_ == pos_.epoch) return;
  shard_order_.resize(files_.size());
  std::iota(shard_order_.begin(), shard_order_.end(), 0);
  if (shuffle_) {
    Rng rng(seed_ ^ (0x5AD0ull * uint64_t(pos_.epoch + 1)));
    shuffle_indices(shard_order_, rng);
  }
  ordered_epoch_ = pos_.epoch;
}

void DataLoader::load_shard() {
  if (loaded_epoch_ == pos_.epoch && loaded_shard_ == pos_.shard) return;
  const int64_t file = shard_file();
  tokens_ = read_shard(files_[size_t(file)], vocab_);
  order_.resize(size_t(shard_samples_[size_t(file)]));
  std::iota(order_.begin(), order_.end(), 0);
  if (shuffle_) {
    Rng rng(seed_ ^ (0x5A3Dull * uint64_t(pos_.epoch + 1)) ^ (uint64_t(file + 1) << 32));
    shuffle_indices(order_, rng);
  }
  loaded_epoch_ = pos_.epoch;
  loaded_shard_ = pos_.shard;
}

void DataLoader::next(int32_t* inputs, int32_t* targets) {
  // Walk the stream over the next `global` samples, shard by shard; copy the ones in this rank's
  // range [lo, hi). Terminates: every epoch holds samples_per_epoch() >= global >= 1 samples
  // (checked at construction), so each pass over the shards advances the walk.
  const int64_t global = int64_t(B_) * world_;
  const int64_t lo = int64_t(rank_) * B_, hi = lo + B_;
  for (int64_t i = 0; i < global;) {
    const int64_t n = shard_samples_[size_t(shard_file())];
    if (pos_.cursor >= n) {
      pos_.cursor = 0;
      if (++pos_.shard >= int64_t(files_.size())) {
        pos_.shard = 0;
        ++pos_.epoch;
        order_shards();
      }
      continue;
    }
    const int64_t take = std::min(global - i, n - pos_.cursor);
    for (int64_t j = std::max(i, lo); j < std::min(i + take, hi); ++j) {
      load_shard();
      const int64_t sample = order_[size_t(pos_.cursor + (j - i))];
      const uint16_t* src = tokens_.data() + sample * T_;
      const int64_t b = j - lo;
      for (int t = 0; t < T_; ++t) {
        inputs[b * T_ + t] = src[t];
        targets[b * T_ + t] = src[t + 1];
      }
    }
    pos_.cursor += take;
    i += take;
  }
}

}  // namespace tda
