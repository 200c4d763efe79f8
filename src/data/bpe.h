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

// Open-addressing hash table from byte strings to a span of int32 values. Built for the encode
// hot path, where a lookup is mostly a cache miss: a slot is 32 bytes (two per cache line) and
// holds the first 16 key bytes inline, so a key of <= 16 bytes (nearly every piece) is compared
// without touching the key arena, and a single value (a whole-token piece) lives in the slot.
class StringTable {
 public:
  struct Span {
    const int32_t* data;
    uint32_t size;
  };
  static constexpr size_t kMaxKey = 65535;  // insert() ignores longer keys
  explicit StringTable(size_t expected = 1024);
  // Returns false (and leaves *out untouched) when the key is absent. *out stays valid until the
  // next insert or clear.
  bool find(std::string_view key, uint64_t hash, Span* out) const;
  void insert(std::string_view key, uint64_t hash, const int32_t* vals, uint32_t n);
  // Starts loading the slot a find(hash) would probe first.
  void prefetch(uint64_t hash) const { __builtin_prefetch(&slots_[hash & (slots_.size() - 1)]); }
  size_t size() const { return size_; }
  void clear();

 private:
  struct Slot {
    uint32_t hash;     // high half of the 64-bit hash (the low half picks the slot)
    uint16_t key_len;  // 0 marks an empty slot (the empty key is never stored)
    uint16_t val_len;  // a piece of <= 65535 bytes has <= 65535 tokens
    uint32_t key_off;  // rest of a key longer than 16 bytes, in keys_
    uint32_t val;      // the value itself when val_len == 1, else its offset in vals_
    uint64_t head[2];  // first 16 key bytes, zero padded
  };
  static_assert(sizeof(Slot) == 32, "two slots per cache line");
  static void load_head(std::string_view key, uint64_t head[2]);
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
    size_t mask = slots_.size() - 1;
    for (size_t i = mix(a, b) & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.a == a && s.b == b) return s.rank;
      if (s.a < 0) return -1;
    }
  }
  size_t size() const { return size_; }

 private:
  struct Slot {  // 12 bytes: key and value in one cache line
    int32_t a = -1, b = -1, rank = -1;
  };
  static uint64_t mix(int32_t a, int32_t b) {
    uint64_t k = (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
    k ^= k >> 29;
    k *= 0xbf58476d1ce4e5b9ull;
    return k ^ (k >> 32);
  }
  std::vector<Slot> slots_;
  size_t size_ = 0;
};

// BPE-merges one pre-tokenised piece (already known not to be a single token) and appends the
// resulting ids to *out. byte_ids maps each byte to its single-byte token. Pieces longer than
// heap_threshold bytes (at most 64) use a heap instead of the quadratic scan; both give the same
// tokens (the parameter exists so tests can check that).
void bpe_merge(std::string_view piece, const int32_t* byte_ids, const PairRanks& ranks,
               std::vector<int32_t>* out, size_t heap_threshold = 64);

}  // namespace tda
