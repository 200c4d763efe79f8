#include "data/bpe.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <functional>
#include <queue>

namespace tda {

namespace {

struct ByteAlphabet {
  uint32_t to_cp[256];
  int from_cp[512];  // every code point of the alphabet is < 324
  ByteAlphabet() {
    std::fill(std::begin(from_cp), std::end(from_cp), -1);
    // Printable Latin-1 bytes map to themselves; the other 68 bytes to 256, 257, ... in order.
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_cp[b] = printable ? uint32_t(b) : uint32_t(256 + n++);
      from_cp[to_cp[b]] = b;
    }
  }
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}

}  // namespace

uint32_t gpt2_byte_to_unicode(uint8_t b) {
  return alphabet().to_cp[b];
}

int gpt2_unicode_to_byte(uint32_t cp) {
  return cp < 512 ? alphabet().from_cp[cp] : -1;
}

uint64_t hash_bytes(const char* p, size_t n) {
  // Word-at-a-time multiply-xorshift; pieces are short, so speed of the tail matters most.
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
    p += 8;
    n -= 8;
  }
  if (n) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * 0x94d049bb133111ebull;
    h ^= h >> 29;
  }
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 32);
}

// ---- StringTable ----

StringTable::StringTable(size_t expected) {
  size_t cap = 16;
  while (cap < expected * 2) cap <<= 1;
  slots_.assign(cap, Slot{});
}

void StringTable::clear() {
  std::fill(slots_.begin(), slots_.end(), Slot{});
  keys_.clear();
  vals_.clear();
  size_ = 0;
}

void StringTable::load_head(std::string_view key, uint64_t head[2]) {
  char buf[16] = {};
  std::memcpy(buf, key.data(), std::min<size_t>(key.size(), 16));
  std::memcpy(head, buf, 16);
}

bool StringTable::find(std::string_view key, uint64_t hash, Span* out) const {
  uint64_t head[2];
  load_head(key, head);
  size_t mask = slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.key_len == 0) return false;
    if (s.hash == uint32_t(hash >> 32) && s.key_len == key.size() && s.head[0] == head[0] &&
        s.head[1] == head[1] &&
        (key.size() <= 16 ||
         std::memcmp(keys_.data() + s.key_off, key.data() + 16, key.size() - 16) == 0)) {
      *out = s.val_len == 1 ? Span{reinterpret_cast<const int32_t*>(&s.val), 1}
                            : Span{vals_.data() + s.val, s.val_len};
      return true;
    }
  }
}

void StringTable::insert(std::string_view key, uint64_t hash, const int32_t* vals, uint32_t n) {
  if (key.empty() || key.size() > kMaxKey || n > kMaxKey) return;
  if ((size_ + 1) * 2 > slots_.size()) grow();
  size_t mask = slots_.size() - 1;
  size_t i = hash & mask;
  while (slots_[i].key_len != 0) i = (i + 1) & mask;
  Slot& s = slots_[i];
  s.hash = uint32_t(hash >> 32);
  s.key_len = uint16_t(key.size());
  load_head(key, s.head);
  s.key_off = uint32_t(keys_.size());
  if (key.size() > 16) keys_.append(key.data() + 16, key.size() - 16);
  s.val_len = uint16_t(n);
  if (n == 1) {
    s.val = uint32_t(vals[0]);
  } else {
    s.val = uint32_t(vals_.size());
    vals_.insert(vals_.end(), vals, vals + n);
  }
  ++size_;
}

void StringTable::grow() {
  // Slots carry only the high hash half, so re-place them by rehashing the stored key bytes.
  std::vector<Slot> old(slots_.size() * 2, Slot{});
  old.swap(slots_);
  size_t mask = slots_.size() - 1;
  std::string key;
  for (const Slot& s : old) {
    if (s.key_len == 0) continue;
    char head[16];
    std::memcpy(head, s.head, 16);
    key.assign(head, std::min<size_t>(s.key_len, 16));
    if (s.key_len > 16) key.append(keys_.data() + s.key_off, s.key_len - 16u);
    size_t i = hash_bytes(key.data(), key.size()) & mask;
    while (slots_[i].key_len != 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

// ---- PairRanks ----

void PairRanks::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  slots_.assign(cap, Slot{});
  size_ = 0;
}

void PairRanks::insert(int32_t a, int32_t b, int32_t rank) {
  if ((size_ + 1) * 2 > slots_.size()) {  // keep the load factor <= 1/2
    std::vector<Slot> old;
    old.swap(slots_);
    reserve(old.size());
    for (const Slot& s : old)
      if (s.a >= 0) insert(s.a, s.b, s.rank);
  }
  size_t mask = slots_.size() - 1;
  size_t i = mix(a, b) & mask;
  while (slots_[i].a >= 0 && !(slots_[i].a == a && slots_[i].b == b)) i = (i + 1) & mask;
  if (slots_[i].a < 0) ++size_;
  // A pair can only concatenate to one byte string, hence to one rank.
  slots_[i] = Slot{a, b, rank};
}

// ---- merging ----

namespace {

// tiktoken's own O(n^2) scan over a flat array: fastest for the short pieces that dominate text.
void merge_small(std::string_view piece, const int32_t* byte_ids, const PairRanks& ranks,
                 std::vector<int32_t>* out) {
  int32_t ids[64], rk[64];
  int n = int(piece.size());
  for (int i = 0; i < n; ++i) ids[i] = byte_ids[uint8_t(piece[i])];
  for (int i = 0; i + 1 < n; ++i) {
    int32_t r = ranks.find(ids[i], ids[i + 1]);
    rk[i] = r < 0 ? INT32_MAX : r;
  }
  while (n > 1) {
    int best = 0;
    for (int i = 1; i + 1 < n; ++i)
      if (rk[i] < rk[best]) best = i;
    if (rk[best] == INT32_MAX) break;
    // The merged token's id is the pair's rank: GPT-2 ranks are the ids of the merged tokens.
    ids[best] = rk[best];
    std::memmove(ids + best + 1, ids + best + 2, sizeof(int32_t) * size_t(n - best - 2));
    if (n - best - 3 > 0)
      std::memmove(rk + best + 1, rk + best + 2, sizeof(int32_t) * size_t(n - best - 3));
    --n;
    if (best > 0) {
      int32_t r = ranks.find(ids[best - 1], ids[best]);
      rk[best - 1] = r < 0 ? INT32_MAX : r;
    }
    if (best + 1 < n) {
      int32_t r = ranks.find(ids[best], ids[best + 1]);
      rk[best] = r < 0 ? INT32_MAX : r;
    }
  }
  out->insert(out->end(), ids, ids + n);
}

// Linked list + min-heap with lazy deletion for long pieces (long digit or whitespace runs),
// where the quadratic scan would dominate. Heap entries order by (rank, start byte), so the pick
// is the same leftmost-lowest pair as the scan's.
void merge_heap(std::string_view piece, const int32_t* byte_ids, const PairRanks& ranks,
                std::vector<int32_t>* out) {
  const int n = int(piece.size());
  std::vector<int32_t> ids(piece.size()), next(piece.size()), prev(piece.size());
  for (int i = 0; i < n; ++i) {
    ids[i] = byte_ids[uint8_t(piece[i])];
    next[i] = i + 1;  // n marks the end
    prev[i] = i - 1;
  }
  using Entry = uint64_t;  // rank << 32 | left node index
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  auto push = [&](int left) {
    if (left < 0 || next[left] >= n) return;
    int32_t r = ranks.find(ids[left], ids[next[left]]);
    if (r >= 0) heap.push((uint64_t(uint32_t(r)) << 32) | uint32_t(left));
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    Entry e = heap.top();
    heap.pop();
    int left = int(uint32_t(e));
    int32_t r = int32_t(e >> 32);
    // Stale when the left node was absorbed (id -1), is now last, or its pair changed since.
    if (ids[left] < 0 || next[left] >= n) continue;
    int right = next[left];
    if (ranks.find(ids[left], ids[right]) != r) continue;
    ids[left] = r;
    ids[right] = -1;
    next[left] = next[right];
    if (next[right] < n) prev[next[right]] = left;
    push(prev[left]);
    push(left);
  }
  for (int i = 0; i < n; i = next[i]) out->push_back(ids[i]);
}

}  // namespace

void bpe_merge(std::string_view piece, const int32_t* byte_ids, const PairRanks& ranks,
               std::vector<int32_t>* out, size_t heap_threshold) {
  if (piece.empty()) return;
  if (piece.size() <= std::min<size_t>(heap_threshold, 64))
    merge_small(piece, byte_ids, ranks, out);
  else
    merge_heap(piece, byte_ids, ranks, out);
}

}  // namespace tda
