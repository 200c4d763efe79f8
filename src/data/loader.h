// Batches of (inputs, targets) from token shards.
//
// A shard of n tokens holds floor((n-1)/T) samples; sample s covers tokens [s*T, s*T+T] (T+1
// tokens: T inputs and T shifted targets). Training order is reproducible: epoch e visits the
// shards in a permutation seeded by (seed, e) and the samples of each shard in a permutation
// seeded by (seed, e, shard). These orders, epoch after epoch, make one stream of samples; a
// global batch is the next W*B samples of the stream, so it may span shards and epochs (shards
// smaller than a batch work, and no sample is skipped). Rank r of W takes samples [r*B, r*B+B)
// of each global batch, so W ranks with micro-batch B see exactly the samples one rank with
// micro-batch W*B would, in the same order; a rank reads only the shards holding its samples.
// The position (epoch, shard, sample cursor) is all a checkpoint needs to resume exactly.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"

namespace tda {

struct LoaderPosition {
  int64_t epoch = 0, shard = 0, cursor = 0;  // cursor counts samples consumed in this shard
};

// Where the trainer's micro-batches come from: token shards (DataLoader) or a synthetic task
// generated from a seed (SyntheticLoader, data/synthetic.h).
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Fills inputs/targets (B*T each) with the next micro-batch of this rank.
  virtual void next(int32_t* inputs, int32_t* targets) = 0;
  virtual void reset() = 0;  // back to the first sample (validation restarts every evaluation)
  virtual LoaderPosition position() const = 0;
  virtual void set_position(const LoaderPosition& p) = 0;
  virtual const std::vector<std::string>& files() const = 0;  // shards read (none: synthetic)
  // Whether targets may be kIgnoreTarget (backend/ops.h): the trainer then counts the ones that
  // do count over each step's micro-batches and ranks, for the mean.
  virtual bool ignores_targets() const { return false; }
};

// The trainer's source of the config's training (val false) or validation data for `rank` of
// `world`: data.synthetic.task when set, else the shards of data.train / data.val.
std::unique_ptr<BatchSource> make_batch_source(const Config& cfg, bool val, int rank, int world);

class DataLoader : public BatchSource {
 public:
  DataLoader(const std::string& pattern, int B, int T, int vocab_size, bool shuffle, uint64_t seed,
             int rank = 0, int world = 1);
  void next(int32_t* inputs, int32_t* targets) override;
  void reset() override;
  LoaderPosition position() const override { return pos_; }
  void set_position(const LoaderPosition& p) override;
  int64_t samples_per_epoch() const;
  const std::vector<std::string>& files() const override { return files_; }

 private:
  void order_shards();  // shard_order_ for pos_.epoch
  void load_shard();    // tokens_ and order_ for pos_.epoch / pos_.shard, if not loaded yet
  int64_t shard_file() const { return shard_order_[size_t(pos_.shard)]; }
  std::vector<std::string> files_;
  int B_, T_, vocab_, rank_, world_;
  bool shuffle_;
  uint64_t seed_;
  LoaderPosition pos_;
  std::vector<int64_t> shard_order_;
  int64_t ordered_epoch_ = -1, loaded_epoch_ = -1, loaded_shard_ = -1;
  std::vector<uint16_t> tokens_;
  std::vector<int64_t> order_;
  std::vector<int64_t> shard_samples_;
};

}  // namespace tda
