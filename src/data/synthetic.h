// Synthetic retrieval tasks, generated on the fly from a seed (no shards): long-context claims
// that a laptop can test, by training at a short length and evaluating far past it (tda synth,
// docs/synth.md). Every sequence is a function of (seed, split, sample index) alone, so a batch
// is deterministic per (seed, step, rank) and validation draws from a stream disjoint from
// training's. Only the answer positions count: every other target is kIgnoreTarget
// (backend/ops.h), and the loss is the mean over the answers.
//
//   mqar        Zoology's multi-query associative recall (Arora et al. 2023): pairs (k_i, v_i)
//               with distinct keys from [1, V/2) and distinct values from [V/2, V), then a query
//               region of two-token slots, filler 0; `queries` of the keys are placed in
//               distinct slots chosen uniformly (Zoology draws them power-law close to the
//               context; uniform slots make a longer sequence a longer distance), each
//               followed by 0. The target at a queried key is its value.
//   mqar_noisy  mqar with `distractors` further slots holding keys that are not in the context
//               (they look like queries; their targets do not count).
//   needles     multi-needle retrieval, the passkey protocol at a small vocabulary: a haystack
//               of random filler tokens holding `pairs` needles [M, k_i, v_i] in distinct
//               three-token slots, then `queries` queries [Q, k_j, v_j] of distinct needles.
//               The target at a queried key is its needle's value. Tokens: M = 0, Q = 1, keys
//               [2, 2+K), values [2+K, 2+2K), filler [2+2K, V) with K = (V-2)/4.
//
// Config: data.synthetic (core/config.cpp): task ("" reads data.train/data.val shards), vocab,
// pairs, queries (0: every pair), distractors (mqar_noisy only).
#pragma once
#include <cstdint>
#include <string>

#include "core/config.h"
#include "data/loader.h"

namespace tda {

// The stream a sequence comes from: training, validation (the trainer's), and test (tda
// synth's evaluation at every length). Different streams never share a sequence seed.
enum class SyntheticSplit { kTrain = 1, kVal = 2, kTest = 3 };

class SyntheticTask {
 public:
  explicit SyntheticTask(const SyntheticConfig& c);
  // Writes T inputs and T targets (kIgnoreTarget except at answers) of sample `index` of
  // `split` under `seed`. T must be >= min_length().
  void generate(uint64_t seed, SyntheticSplit split, uint64_t index, int T, int32_t* inputs,
                int32_t* targets) const;
  int min_length() const;  // the shortest sequence that holds the pairs, queries, distractors
  int answers() const;     // counted targets per sequence
  const SyntheticConfig& config() const { return c_; }

 private:
  void mqar(uint64_t s, int T, int32_t* in, int32_t* tg) const;
  void needles(uint64_t s, int T, int32_t* in, int32_t* tg) const;
  SyntheticConfig c_;
};

// Returns "" or what is wrong with data.synthetic for sequences of seq_len tokens over a model
// vocabulary of real_vocab tokens, as one line naming the keys (core/config.cpp reports it).
std::string synthetic_config_problem(const SyntheticConfig& c, int seq_len, int real_vocab);

// The trainer's batches of a synthetic task: sample i of the stream is generate(seed, split, i),
// and a global batch is the next W*B samples, rank r taking [r*B, r*B+B) (as DataLoader).
class SyntheticLoader : public BatchSource {
 public:
  SyntheticLoader(const SyntheticConfig& c, SyntheticSplit split, int B, int T, uint64_t seed,
                  int rank = 0, int world = 1);
  void next(int32_t* inputs, int32_t* targets) override;
  void reset() override { pos_ = LoaderPosition{}; }
  LoaderPosition position() const override { return pos_; }
  void set_position(const LoaderPosition& p) override;
  const std::vector<std::string>& files() const override { return files_; }
  bool ignores_targets() const override { return true; }

 private:
  SyntheticTask task_;
  SyntheticSplit split_;
  int B_, T_, rank_, world_;
  uint64_t seed_;
  LoaderPosition pos_;              // cursor: samples of the stream consumed by all ranks
  std::vector<std::string> files_;  // none
};

}  // namespace tda
