#include "data/synthetic.h"

#include <algorithm>
#include <numeric>

#include "backend/ops.h"
#include "core/error.h"
#include "core/rng.h"

namespace tda {

namespace {

// The seed of one sequence: a bijection of (split, index) under a given seed, so no two
// sequences of a run (training, validation or test) share one.
uint64_t sequence_seed(uint64_t seed, SyntheticSplit split, uint64_t index) {
  uint64_t h = splitmix64(seed) ^ (uint64_t(split) << 56) ^ index;
  return splitmix64(h);
}

// k distinct integers of [lo, hi), in random order (a partial Fisher-Yates shuffle).
std::vector<int> distinct(Rng& rng, int lo, int hi, int k) {
  std::vector<int> v(size_t(hi - lo));
  std::iota(v.begin(), v.end(), lo);
  for (int i = 0; i < k; ++i) std::swap(v[size_t(i)], v[size_t(i) + rng.below(v.size() - i)]);
  v.resize(size_t(k));
  return v;
}

bool is_mqar(const std::string& task) {
  return task == "mqar" || task == "mqar_noisy";
}

// needles: the key, value and filler ranges of vocabulary V (M = 0, Q = 1 before them).
int needle_keys(int V) {
  return (V - 2) / 4;
}

}  // namespace

SyntheticTask::SyntheticTask(const SyntheticConfig& c) : c_(c) {
  TDA_CHECK(is_mqar(c.task) || c.task == "needles",
            "data.synthetic.task \"" + c.task + "\" is not a synthetic task");
  if (c_.queries == 0) c_.queries = c_.pairs;
}

int SyntheticTask::min_length() const {
  if (is_mqar(c_.task)) return 2 * c_.pairs + 2 * (c_.queries + c_.distractors);
  return 3 * c_.pairs + 3 * c_.queries;
}

int SyntheticTask::answers() const {
  return c_.queries;
}

void SyntheticTask::generate(uint64_t seed, SyntheticSplit split, uint64_t index, int T,
                             int32_t* inputs, int32_t* targets) const {
  TDA_CHECK(T >= min_length(), "synthetic " + c_.task + ": a sequence of " + std::to_string(T) +
                                   " tokens cannot hold the task (it needs " +
                                   std::to_string(min_length()) + ")");
  std::fill(inputs, inputs + T, 0);
  std::fill(targets, targets + T, kIgnoreTarget);
  const uint64_t s = sequence_seed(seed, split, index);
  if (is_mqar(c_.task))
    mqar(s, T, inputs, targets);
  else
    needles(s, T, inputs, targets);
}

void SyntheticTask::mqar(uint64_t s, int T, int32_t* in, int32_t* tg) const {
  Rng rng(s);
  const int V = c_.vocab, half = V / 2, n = c_.pairs, q = c_.queries, d = c_.distractors;
  const std::vector<int> keys = distinct(rng, 1, half, n), values = distinct(rng, half, V, n);
  for (int i = 0; i < n; ++i) {
    in[2 * i] = keys[size_t(i)];
    in[2 * i + 1] = values[size_t(i)];
  }
  // Two-token slots after the context: a query (or distractor) key, then filler 0.
  const int slots = (T - 2 * n) / 2;
  const std::vector<int> at = distinct(rng, 0, slots, q + d), asked = distinct(rng, 0, n, q);
  for (int j = 0; j < q; ++j) {
    const int p = 2 * n + 2 * at[size_t(j)];
    in[p] = keys[size_t(asked[size_t(j)])];
    tg[p] = values[size_t(asked[size_t(j)])];
  }
  if (d == 0) return;
  // Distractors: keys of the key range that the context does not hold (no answer exists).
  std::vector<int> absent;
  for (int k = 1; k < half; ++k)
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) absent.push_back(k);
  for (int j = 0; j < d; ++j)
    in[2 * n + 2 * at[size_t(q + j)]] = absent[size_t(rng.below(absent.size()))];
}

void SyntheticTask::needles(uint64_t s, int T, int32_t* in, int32_t* tg) const {
  Rng rng(s);
  const int V = c_.vocab, K = needle_keys(V), n = c_.pairs, q = c_.queries;
  const int key0 = 2, value0 = 2 + K, filler0 = 2 + 2 * K;
  const int haystack = T - 3 * q;
  for (int p = 0; p < haystack; ++p) in[p] = filler0 + int(rng.below(uint64_t(V - filler0)));
  const std::vector<int> keys = distinct(rng, key0, key0 + K, n);
  std::vector<int> values(static_cast<size_t>(n));
  for (auto& v : values) v = value0 + int(rng.below(uint64_t(K)));
  const std::vector<int> at = distinct(rng, 0, haystack / 3, n);
  for (int i = 0; i < n; ++i) {
    const int p = 3 * at[size_t(i)];
    in[p] = 0;  // M
    in[p + 1] = keys[size_t(i)];
    in[p + 2] = values[size_t(i)];
  }
  const std::vector<int> asked = distinct(rng, 0, n, q);
  for (int j = 0; j < q; ++j) {
    const int p = haystack + 3 * j, i = asked[size_t(j)];
    in[p] = 1;  // Q
    in[p + 1] = keys[size_t(i)];
    in[p + 2] = values[size_t(i)];
    tg[p + 1] = values[size_t(i)];
  }
}

std::string synthetic_config_problem(const SyntheticConfig& c, int seq_len, int real_vocab) {
  if (c.task.empty()) return "";
  const std::string key = "config key 'data.synthetic.";
  if (!is_mqar(c.task) && c.task != "needles")
    return key + "task' must be \"\" (shards), \"mqar\", \"mqar_noisy\" or \"needles\", got \"" +
           c.task + "\"";
  if (c.vocab < 8 || c.vocab > real_vocab)
    return key + "vocab' must be in [8, model.real_vocab_size = " + std::to_string(real_vocab) +
           "], got " + std::to_string(c.vocab);
  // Pairs the vocabulary can hold: distinct keys (mqar: [1, V/2), leaving one key out for
  // mqar_noisy's distractors; needles: K of them).
  const int most = c.task == "needles" ? needle_keys(c.vocab)
                                       : c.vocab / 2 - 1 - (c.task == "mqar_noisy" ? 1 : 0);
  if (c.pairs < 1 || c.pairs > most)
    return key + "pairs' must be in [1, " + std::to_string(most) + "] for task " + c.task +
           " at data.synthetic.vocab " + std::to_string(c.vocab) + ", got " +
           std::to_string(c.pairs);
  if (c.queries < 0 || c.queries > c.pairs)
    return key + "queries' must be in [0, data.synthetic.pairs = " + std::to_string(c.pairs) +
           "] (0: every pair), got " + std::to_string(c.queries);
  if (c.task == "mqar_noisy" ? c.distractors < 1 : c.distractors != 0)
    return key + "distractors' must be " +
           (c.task == "mqar_noisy" ? ">= 1 for task mqar_noisy"
                                   : "0 unless data.synthetic.task is mqar_noisy") +
           ", got " + std::to_string(c.distractors);
  const SyntheticTask task(c);
  if (task.min_length() > seq_len)
    return "data.synthetic: task " + c.task + " with pairs " + std::to_string(c.pairs) +
           ", queries " + std::to_string(task.answers()) + ", distractors " +
           std::to_string(c.distractors) +
           " needs model.seq_len >= " + std::to_string(task.min_length()) + ", got " +
           std::to_string(seq_len);
  return "";
}

SyntheticLoader::SyntheticLoader(const SyntheticConfig& c, SyntheticSplit split, int B, int T,
                                 uint64_t seed, int rank, int world)
    : task_(c), split_(split), B_(B), T_(T), rank_(rank), world_(world), seed_(seed) {}

void SyntheticLoader::next(int32_t* inputs, int32_t* targets) {
  const int64_t first = pos_.cursor + int64_t(rank_) * B_;
  for (int b = 0; b < B_; ++b)
    task_.generate(seed_, split_, uint64_t(first + b), T_, inputs + size_t(b) * T_,
                   targets + size_t(b) * T_);
  pos_.cursor += int64_t(B_) * world_;
}

void SyntheticLoader::set_position(const LoaderPosition& p) {
  TDA_CHECK(p.epoch == 0 && p.shard == 0 && p.cursor >= 0,
            "data: loader position (epoch " + std::to_string(p.epoch) + ", shard " +
                std::to_string(p.shard) +
                ") is not a synthetic task's (was the run trained on shards?)");
  pos_ = p;
}

}  // namespace tda
