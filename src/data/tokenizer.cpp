// GPT-2 tokenizer: loading encoder.json / vocab.bpe, encode with the per-thread cache, decode.
#include "data/tokenizer.h"

#include <atomic>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/error.h"
#include "core/fs.h"
#include "data/bpe.h"
#include "data/pretokenize.h"

namespace tda {

namespace {

constexpr int kVocab = 50257;
constexpr int kEot = 50256;
constexpr std::string_view kEotText = "<|endoftext|>";
// Per-thread cache bound: beyond this many distinct multi-token pieces the cache starts over
// (long enough runs of novel text would otherwise grow it without limit).
constexpr size_t kMaxCacheEntries = size_t(1) << 19;

std::atomic<uint64_t> g_next_id{1};

// encoder.json keys are bytes spelled in the GPT-2 byte alphabet; decode them back to bytes.
bool unicode_key_to_bytes(const std::string& key, std::string* out) {
  out->clear();
  const auto* p = reinterpret_cast<const unsigned char*>(key.data());
  size_t n = key.size();
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    if (p[i] < 0x80) {
      cp = p[i++];
    } else if ((p[i] & 0xE0) == 0xC0 && i + 1 < n) {
      cp = (uint32_t(p[i] & 0x1F) << 6) | (p[i + 1] & 0x3F);
      i += 2;
    } else {
      return false;  // the alphabet only uses code points below U+0800
    }
    int b = gpt2_unicode_to_byte(cp);
    if (b < 0) return false;
    out->push_back(char(b));
  }
  return !out->empty();
}

}  // namespace

struct Gpt2Tokenizer::Impl {
  uint64_t id = g_next_id++;
  std::vector<std::string> token_bytes;  // id -> bytes (the special token's text for 50256)
  StringTable vocab{kVocab};             // bytes -> id (ordinary tokens only)
  PairRanks ranks;
  int32_t byte_ids[256];
  Pretokenizer pretok;

  void encode_ordinary(std::string_view text, StringTable* cache, std::vector<int32_t>* out) const;
};

namespace {

struct ThreadCache {
  uint64_t owner = 0;
  StringTable table{1 << 16};
};

StringTable* thread_cache(uint64_t owner) {
  thread_local ThreadCache c;
  // Caches of different tokenizers must not mix; a thread alternating between two tokenizers
  // just restarts its cache.
  if (c.owner != owner) {
    c.table.clear();
    c.owner = owner;
  }
  if (c.table.size() > kMaxCacheEntries) c.table.clear();
  return &c.table;
}

void load_encoder(const std::string& path, Gpt2Tokenizer::Impl* t) {
  std::vector<char> raw = read_file_bytes(path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(raw.begin(), raw.end());
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": invalid JSON: " + e.what());
  }
  TDA_CHECK(j.is_object(), path + ": expected a JSON object of token -> id");
  TDA_CHECK(j.size() == size_t(kVocab), path + ": has " + std::to_string(j.size()) +
                                            " tokens, GPT-2 has " + std::to_string(kVocab));
  t->token_bytes.assign(kVocab, std::string());
  std::vector<bool> seen(kVocab, false);
  std::string bytes;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    TDA_CHECK(it->is_number_integer(), path + ": id of token '" + key + "' is not an integer");
    int64_t id = it->get<int64_t>();
    TDA_CHECK(id >= 0 && id < kVocab && !seen[size_t(id)],
              path + ": token '" + key + "' has bad or duplicate id " + std::to_string(id));
    seen[size_t(id)] = true;
    if (key == kEotText) {
      TDA_CHECK(id == kEot, path + ": <|endoftext|> must have id 50256, has " + std::to_string(id));
      t->token_bytes[size_t(id)] = key;
      continue;
    }
    TDA_CHECK(unicode_key_to_bytes(key, &bytes), path + ": token '" + key + "' (id " +
                                                     std::to_string(id) +
                                                     ") is not spelled in the GPT-2 byte alphabet");
    t->token_bytes[size_t(id)] = bytes;
    int32_t id32 = int32_t(id);
    t->vocab.insert(bytes, hash_bytes(bytes.data(), bytes.size()), &id32, 1);
  }
  TDA_CHECK(t->token_bytes[kEot] == kEotText, path + ": no <|endoftext|> token");
  for (int b = 0; b < 256; ++b) {
    char c = char(b);
    StringTable::Span s;
    TDA_CHECK(t->vocab.find(std::string_view(&c, 1), hash_bytes(&c, 1), &s),
              path + ": no token for byte " + std::to_string(b));
    t->byte_ids[b] = s.data[0];
  }
}

// vocab.bpe is not needed to encode (tiktoken merges by the rank of the concatenated bytes, which
// is the token id), but it must agree with encoder.json: merge i creates token 256 + i. Checking
// that catches mismatched or corrupted files instead of silently tokenizing differently.
void check_merges(const std::string& path, const Gpt2Tokenizer::Impl& t) {
  std::vector<char> raw = read_file_bytes(path);
  std::string_view text(raw.data(), raw.size());
  size_t pos = 0, line = 0, merges = 0;
  std::string a, b;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view l = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line;
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (l.empty() || (line == 1 && l.substr(0, 8) == "#version")) continue;
    std::string where = path + ":" + std::to_string(line) + ": ";
    size_t sp = l.find(' ');
    TDA_CHECK(sp != std::string_view::npos && l.find(' ', sp + 1) == std::string_view::npos,
              where + "expected two tokens separated by one space");
    TDA_CHECK(unicode_key_to_bytes(std::string(l.substr(0, sp)), &a) &&
                  unicode_key_to_bytes(std::string(l.substr(sp + 1)), &b),
              where + "token not spelled in the GPT-2 byte alphabet");
    std::string ab = a + b;
    StringTable::Span s;
    TDA_CHECK(t.vocab.find(ab, hash_bytes(ab.data(), ab.size()), &s),
              where + "merge result is not in encoder.json");
    TDA_CHECK(s.data[0] == int32_t(256 + merges),
              where + "merge " + std::to_string(merges) + " creates token " +
                  std::to_string(s.data[0]) + ", encoder.json order expects " +
                  std::to_string(256 + merges));
    ++merges;
  }
  TDA_CHECK(merges == size_t(kVocab - 257),
            path + ": has " + std::to_string(merges) + " merges, GPT-2 has 50000");
}

}  // namespace

Gpt2Tokenizer Gpt2Tokenizer::load(const std::string& dir) {
  auto impl = std::make_shared<Impl>();
  load_encoder(dir + "/encoder.json", impl.get());
  check_merges(dir + "/vocab.bpe", *impl);
  // Every way to split a token into two tokens is a pair that merges into it (tiktoken's rule).
  // GPT-2 has 108,299 such pairs; sized for them up front (the table grows if needed).
  impl->ranks.reserve(110000);
  for (int32_t id = 0; id < kEot; ++id) {
    const std::string& s = impl->token_bytes[size_t(id)];
    StringTable::Span l, r;
    for (size_t k = 1; k < s.size(); ++k) {
      if (impl->vocab.find(std::string_view(s).substr(0, k), hash_bytes(s.data(), k), &l) &&
          impl->vocab.find(std::string_view(s).substr(k), hash_bytes(s.data() + k, s.size() - k),
                           &r))
        impl->ranks.insert(l.data[0], r.data[0], id);
    }
  }
  Gpt2Tokenizer t;
  t.impl_ = std::move(impl);
  return t;
}

std::string Gpt2Tokenizer::default_dir() {
  return TDA_SOURCE_DIR "/data/gpt2_tokenizer";
}

int Gpt2Tokenizer::vocab_size() const {
  return kVocab;
}

void Gpt2Tokenizer::Impl::encode_ordinary(std::string_view text, StringTable* cache,
                                          std::vector<int32_t>* out) const {
  // Table lookups are dominated by cache misses (the vocab table is 4 MB), so pieces are
  // handled in groups: hash and prefetch a group's slots first, then look them up, letting the
  // misses overlap instead of being paid one after another.
  constexpr int kGroup = 32;
  struct Piece {
    std::string_view s;
    uint64_t h;
  } group[kGroup];
  int n = 0;
  auto flush = [&] {
    for (int i = 0; i < n; ++i) {
      const Piece& p = group[i];
      StringTable::Span s;
      // Most pieces are whole tokens; tiktoken also takes that shortcut before running BPE.
      if (vocab.find(p.s, p.h, &s) || cache->find(p.s, p.h, &s)) {
        out->insert(out->end(), s.data, s.data + s.size);
        continue;
      }
      size_t before = out->size();
      bpe_merge(p.s, byte_ids, ranks, out);
      cache->insert(p.s, p.h, out->data() + before, uint32_t(out->size() - before));
    }
    n = 0;
  };
  pretok.split(text, [&](std::string_view piece) {
    uint64_t h = hash_bytes(piece.data(), piece.size());
    vocab.prefetch(h);
    cache->prefetch(h);
    group[n++] = Piece{piece, h};
    if (n == kGroup) flush();
  });
  flush();
}

void Gpt2Tokenizer::encode_into(const std::string& text, bool allow_special,
                                std::vector<int32_t>* out) const {
  std::string storage;
  std::string_view s = sanitize_utf8(text, &storage);
  StringTable* cache = thread_cache(impl_->id);
  if (!allow_special) {
    impl_->encode_ordinary(s, cache, out);
    return;
  }
  // Like tiktoken, the text between special tokens is pre-tokenised on its own, so a regex
  // lookahead never sees past a special token.
  size_t pos = 0;
  for (size_t at; (at = s.find(kEotText, pos)) != std::string_view::npos;) {
    impl_->encode_ordinary(s.substr(pos, at - pos), cache, out);
    out->push_back(kEot);
    pos = at + kEotText.size();
  }
  impl_->encode_ordinary(s.substr(pos), cache, out);
}

std::vector<int32_t> Gpt2Tokenizer::encode(const std::string& text, bool allow_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 16);
  encode_into(text, allow_special, &out);
  return out;
}

std::string Gpt2Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  out.reserve(ids.size() * 4);
  for (size_t i = 0; i < ids.size(); ++i) {
    int32_t id = ids[i];
    TDA_CHECK(id >= 0 && id < kVocab, "decode: token id " + std::to_string(id) + " at position " +
                                          std::to_string(i) + " is outside the GPT-2 vocab");
    out += impl_->token_bytes[size_t(id)];
  }
  return out;
}

}  // namespace tda
