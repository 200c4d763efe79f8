// Byte-level BPE pieces of the GPT-2 tokenizer: the byte<->unicode alphabet of encoder.json,
// a small open-addressing string table (vocab lookup and the per-thread word cache), and the
// merge loop. The merge loop reproduces tiktoken's `_byte_pair_merge` exactly: repeatedly merge
// the adjacent pair whose concatenation has the lowest rank (= token id), leftmost on ties.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tda {

// GPT-2's bytes_to_unicode(): every byte maps to a printable code point so that encoder.json
// keys are readable text. Returns the code point for byte b.
uint32_t gpt2_byte_to_unicode(uint8_t b);
// Inverse of the above; returns -1 for code points outside the 256-entry alphabet.
int gpt2_unicode_to_byte(uint32_t cp);

uint64_t hash_bytes(const char* p, size_t n);

// Open-addressing hash table from byte strings to a span of int32 values, with keys and values
// stored in flat arenas (no allocation per entry, lookups by string_view without a copy).
class StringTable {
 public:
  struct Span {
    const int32_t* data;
    uint32_t size;
  };
  explicit StringTable(size_t expected = 1024);
  // Returns false (and leaves *out untouched) when the key is absent.
  bool find(std::string_view key, uint64_t hash, Span* out) const;
  void insert(std::string_view key, uint64_t hash, const int32_t* vals, uint32_t n);
  size_t size() const { return size_; }
  size_t bytes() const { return keys_.size() + 4 * vals_.size() + sizeof(Slot) * slots_.size(); }
  void clear();

 private:
  struct Slot {
    uint64_t hash;
    uint32_t key_off, key_len, val_off, val_len;  // key_len == UINT32_MAX marks an empty slot
  };
  void grow();
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<int32_t> vals_;
  size_t size_ = 0;
};

// Rank table of adjacent token pairs: (left id, right id) -> id of their concatenation, for every
// pair of tokens whose concatenation is itself a token (that is tiktoken's merge rule: it looks
// up the concatenated bytes, not the merge list). Open addressing keyed by the packed id pair.
class PairRanks {
 public:
  void reserve(size_t n);
  void insert(int32_t a, int32_t b, int32_t rank);
  int32_t find(int32_t a, int32_t b) const {  // -1 if the pair never merges
    uint64_t key = (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
    size_t mask = keys_.size() - 1;
    for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
      if (keys_[i] == key) return ranks_[i];
      if (keys_[i] == kEmpty) return -1;
    }
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  static uint64_t mix(uint64_t k) {
    k ^= k >> 29;
    k *= 0xbf58476d1ce4e5b9ull;
    return k ^ (k >> 32);
  }
  std::vector<uint64_t> keys_;
  std::vector<int32_t> ranks_;
  size_t size_ = 0;
};

// BPE-merges one pre-tokenised piece (already known not to be a single token) and appends the
// resulting ids to *out. byte_ids maps each byte to its single-byte token. Pieces longer than
// heap_threshold bytes (at most 64) use a heap instead of the quadratic scan; both give the same
// tokens (the parameter exists so tests can check that).
void bpe_merge(std::string_view piece, const int32_t* byte_ids, const PairRanks& ranks,
               std::vector<int32_t>* out, size_t heap_threshold = 64);

}  // namespace tda
