// GPT-2 tokenizer without the Python oracle: known ids, round trips, special tokens, invalid
// UTF-8, bad vocab files, merge-loop equivalence, thread safety.
#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <random>
#include <thread>

#include "core/error.h"
#include "core/fs.h"
#include "data/bpe.h"
#include "data/pretokenize.h"
#include "data/tokenizer.h"
#include "test_util.h"

using namespace tda;

namespace {

const Gpt2Tokenizer& tok() {
  static const Gpt2Tokenizer t = Gpt2Tokenizer::load(Gpt2Tokenizer::default_dir());
  return t;
}

std::string file_text(const std::string& path) {
  std::vector<char> b = read_file_bytes(path);
  return std::string(b.begin(), b.end());
}

}  // namespace

TEST_CASE("tokenizer: known GPT-2 ids", "[tokenizer]") {
  CHECK(tok().vocab_size() == 50257);
  CHECK(tok().eot() == 50256);
  CHECK(tok().encode("Hello world") == std::vector<int32_t>{15496, 995});
  CHECK(tok().encode(" the") == std::vector<int32_t>{262});
  CHECK(tok().encode("") == std::vector<int32_t>{});
  // The published check for this vocab (shared/data/README.md and nanoGPT's 301,966 + 36,059).
  std::string shakespeare = file_text(source_dir() + "/data/tinyshakespeare/input.txt");
  std::vector<int32_t> ids = tok().encode(shakespeare);
  CHECK(ids.size() == 338025);
  std::vector<int32_t> head(ids.begin(), ids.begin() + 10);
  CHECK(head == std::vector<int32_t>{5962, 22307, 25, 198, 8421, 356, 5120, 597, 2252, 11});
}

TEST_CASE("tokenizer: decode(encode(x)) == x for valid UTF-8", "[tokenizer]") {
  for (const char* f :
       {"/data/tinyshakespeare/input.txt", "/tests/data/tokenizer_adversarial.txt"}) {
    std::string text = file_text(source_dir() + f);
    INFO(f);
    CHECK(tok().decode(tok().encode(text, false)) == text);
    CHECK(tok().decode(tok().encode(text, true)) == text);
  }
  std::string odd =
      std::string("a\0b", 3) + "\t\r\n \xC2\xA0\xE3\x80\x80 \xF0\x9F\x91\xA8\xE2\x80\x8D";
  CHECK(tok().decode(tok().encode(odd)) == odd);
}

TEST_CASE("tokenizer: <|endoftext|> with and without allow_special", "[tokenizer]") {
  std::string s = "a<|endoftext|>b";
  std::vector<int32_t> special = tok().encode(s, true);
  std::vector<int32_t> ordinary = tok().encode(s, false);
  CHECK(special == std::vector<int32_t>{64, 50256, 65});
  CHECK(std::count(ordinary.begin(), ordinary.end(), 50256) == 0);
  CHECK(tok().decode(ordinary) == s);
  CHECK(tok().decode(special) == s);
  CHECK(tok().encode("<|endoftext|>") == std::vector<int32_t>{50256});
  // Text on each side of a special token is pre-tokenised separately (as tiktoken): the
  // whitespace before it is not absorbed by a following word.
  std::vector<int32_t> want = tok().encode("x  ");
  want.push_back(50256);
  for (int32_t id : tok().encode(" y")) want.push_back(id);
  CHECK(tok().encode("x  <|endoftext|> y") == want);
  CHECK(tok().encode("x  <|endoftext|> y", false) != want);
}

TEST_CASE("tokenizer: invalid UTF-8 is replaced like Python's errors='replace'", "[tokenizer]") {
  const std::string R = "\xEF\xBF\xBD";  // U+FFFD
  struct Case {
    std::string in, out;
  } cases[] = {
      {"\xC0\xAF", R + R},  // overlong lead bytes are never valid
      {"\xE2\x82"
       "A",
       R + "A"},                            // truncated sequence = one maximal subpart
      {"\xED\xA0\x80", R + R + R},          // UTF-16 surrogate
      {"\xF0\x9F\x98", R},                  // truncated at end of text
      {"\xF4\x90\x80\x80", R + R + R + R},  // above U+10FFFF
      {"\xFF", R},
      {"a\x80"
       "b",
       "a" + R + "b"},
      {"\xE0\x80\x80", R + R + R},  // overlong
      {"\xF0\x9F\x98\x80", "\xF0\x9F\x98\x80"},
  };
  for (const auto& c : cases) {
    std::string storage;
    CHECK(std::string(sanitize_utf8(c.in, &storage)) == c.out);
    CHECK(tok().encode(c.in) == tok().encode(c.out));
  }
  std::string valid = "plain \xE6\x97\xA5\xE6\x9C\xAC";
  std::string storage;
  CHECK(sanitize_utf8(valid, &storage).data() == valid.data());  // no copy when valid
  CHECK(tok().decode(tok().encode("ok\xFF")) == "ok" + R);
}

TEST_CASE("tokenizer: decode rejects ids outside the vocab", "[tokenizer][badinput]") {
  CHECK_THROWS_WITH(tok().decode({1, 50257}), Catch::Contains("token id 50257 at position 1"));
  CHECK_THROWS_WITH(tok().decode({-1}), Catch::Contains("token id -1"));
}

TEST_CASE("tokenizer: bad vocab files name the file", "[tokenizer][badinput]") {
  TempDir d;
  CHECK_THROWS_WITH(Gpt2Tokenizer::load(d.path), Catch::Contains(d.path + "/encoder.json"));
  std::string enc = file_text(Gpt2Tokenizer::default_dir() + "/encoder.json");
  std::string bpe = file_text(Gpt2Tokenizer::default_dir() + "/vocab.bpe");
  write_text(d.path + "/encoder.json", enc.substr(0, enc.size() / 2));
  write_text(d.path + "/vocab.bpe", bpe);
  CHECK_THROWS_WITH(Gpt2Tokenizer::load(d.path), Catch::Contains("encoder.json: invalid JSON"));
  write_text(d.path + "/encoder.json", R"({"a": 0})");
  CHECK_THROWS_WITH(Gpt2Tokenizer::load(d.path), Catch::Contains("encoder.json: has 1 tokens"));
  // Swap two merges: vocab.bpe no longer agrees with encoder.json's ids.
  write_text(d.path + "/encoder.json", enc);
  size_t l2 = bpe.find('\n') + 1, l3 = bpe.find('\n', l2) + 1, l4 = bpe.find('\n', l3) + 1;
  std::string swapped =
      bpe.substr(0, l2) + bpe.substr(l3, l4 - l3) + bpe.substr(l2, l3 - l2) + bpe.substr(l4);
  write_text(d.path + "/vocab.bpe", swapped);
  CHECK_THROWS_WITH(Gpt2Tokenizer::load(d.path), Catch::Contains("vocab.bpe:2: merge 0 creates"));
  write_text(d.path + "/vocab.bpe", "#version: 0.2\nonlyone\n");
  CHECK_THROWS_WITH(Gpt2Tokenizer::load(d.path), Catch::Contains("vocab.bpe:2: expected two"));
}

TEST_CASE("tokenizer: heap merge equals the scan merge", "[tokenizer]") {
  // Build a PairRanks-backed merge through the public tokenizer's own data: compare the two
  // merge paths on pieces of many shapes via bpe_merge's threshold parameter.
  std::vector<std::string> token_bytes;
  StringTable vocab(60000);
  for (int32_t id = 0; id < 50256; ++id) token_bytes.push_back(tok().decode({id}));
  for (int32_t id = 0; id < 50256; ++id) {
    const std::string& s = token_bytes[size_t(id)];
    vocab.insert(s, hash_bytes(s.data(), s.size()), &id, 1);
  }
  PairRanks ranks;
  ranks.reserve(110000);
  for (int32_t id = 0; id < 50256; ++id) {
    const std::string& s = token_bytes[size_t(id)];
    StringTable::Span l, r;
    for (size_t k = 1; k < s.size(); ++k)
      if (vocab.find(s.substr(0, k), hash_bytes(s.data(), k), &l) &&
          vocab.find(s.substr(k), hash_bytes(s.data() + k, s.size() - k), &r))
        ranks.insert(l.data[0], r.data[0], id);
  }
  int32_t byte_ids[256];
  for (int b = 0; b < 256; ++b) {
    char c = char(b);
    StringTable::Span s;
    REQUIRE(vocab.find(std::string_view(&c, 1), hash_bytes(&c, 1), &s));
    byte_ids[b] = s.data[0];
  }
  std::mt19937 rng(7);
  const std::string alphabet = "aaabbcdeeeinorst  \n0123";
  for (int i = 0; i < 3000; ++i) {
    std::string piece;
    size_t len = 2 + rng() % 60;
    for (size_t k = 0; k < len; ++k) piece += alphabet[rng() % alphabet.size()];
    std::vector<int32_t> a, b;
    bpe_merge(piece, byte_ids, ranks, &a, 64);
    bpe_merge(piece, byte_ids, ranks, &b, 0);
    INFO(piece);
    REQUIRE(a == b);
    REQUIRE(tok().decode(a) == piece);
  }
}

TEST_CASE("tokenizer: concurrent encodes agree", "[tokenizer]") {
  std::string text = file_text(source_dir() + "/tests/data/tokenizer_adversarial.txt");
  std::vector<int32_t> want = tok().encode(text);
  std::vector<std::vector<int32_t>> got(4);
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i)
    ts.emplace_back([&, i] {
      for (int r = 0; r < 20; ++r) got[size_t(i)] = tok().encode(text);
    });
  for (auto& t : ts) t.join();
  for (const auto& g : got) CHECK(g == want);
  // A second tokenizer instance used on the same thread must not see the first one's cache.
  Gpt2Tokenizer other = Gpt2Tokenizer::load(Gpt2Tokenizer::default_dir());
  CHECK(other.encode(text) == want);
  CHECK(tok().encode(text) == want);
}
