// Token-for-token equality with tiktoken's gpt2 encoding (scripts/tiktoken_encode.py, run with
// the repo's .venv Python). Skips with a warning when that Python or tiktoken is missing.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

#include "core/fs.h"
#include "data/tokenizer.h"
#include "test_util.h"

using namespace tda;

namespace {

const Gpt2Tokenizer& tok() {
  static const Gpt2Tokenizer t = Gpt2Tokenizer::load(Gpt2Tokenizer::default_dir());
  return t;
}

const std::string kPython = TDA_SOURCE_DIR "/.venv/bin/python";

bool oracle_available() {
  static int ok = -1;
  if (ok < 0)
    ok = path_exists(kPython) &&
         std::system((kPython + " -c 'import tiktoken' >/dev/null 2>&1").c_str()) == 0;
  return ok == 1;
}

// Encodes every file with tiktoken in one Python process; returns the ids per file.
std::vector<std::vector<int32_t>> oracle(const std::vector<std::string>& files, bool special) {
  TempDir d;
  std::string cmd =
      kPython + " " + source_dir() + "/scripts/tiktoken_encode.py" + (special ? " --special" : "");
  for (size_t i = 0; i < files.size(); ++i)
    cmd += " '" + files[i] + "' " + d.path + "/" + std::to_string(i) + ".bin";
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < files.size(); ++i) {
    std::vector<char> b = read_file_bytes(d.path + "/" + std::to_string(i) + ".bin");
    std::vector<int32_t> ids(b.size() / 4);
    if (!ids.empty()) std::memcpy(ids.data(), b.data(), b.size());
    out.push_back(std::move(ids));
  }
  return out;
}

std::string file_text(const std::string& path) {
  std::vector<char> b = read_file_bytes(path);
  return std::string(b.begin(), b.end());
}

// Compares ours with tiktoken's ids; on a mismatch reports the first differing position with
// the decoded context, which is what one needs to find the regex or merge rule at fault.
void check_same(const std::string& name, const std::vector<int32_t>& ours,
                const std::vector<int32_t>& ref) {
  INFO(name << ": " << ours.size() << " tokens vs tiktoken " << ref.size());
  size_t i = 0;
  while (i < ours.size() && i < ref.size() && ours[i] == ref[i]) ++i;
  if (i < ours.size() || i < ref.size()) {
    size_t lo = i >= 8 ? i - 8 : 0;
    auto ctx = [&](const std::vector<int32_t>& v) {
      std::vector<int32_t> w(v.begin() + long(std::min(lo, v.size())),
                             v.begin() + long(std::min(i + 4, v.size())));
      return tok().decode(w);
    };
    FAIL("first difference at token " << i << ": ours '" << ctx(ours) << "' tiktoken '" << ctx(ref)
                                      << "'");
  }
  SUCCEED();
}

void check_files(const std::vector<std::string>& files, bool special) {
  auto ref = oracle(files, special);
  for (size_t i = 0; i < files.size(); ++i)
    check_same(files[i], tok().encode(file_text(files[i]), special), ref[i]);
}

}  // namespace

TEST_CASE("tokenizer oracle: bundled corpus and adversarial UTF-8 file", "[tokenizer]") {
  if (!oracle_available()) {
    TDA_SKIP(kPython << " with tiktoken not found");
  }
  std::vector<std::string> files = {source_dir() + "/data/tinyshakespeare/input.txt",
                                    source_dir() + "/tests/data/tokenizer_adversarial.txt"};
  check_files(files, false);
  check_files({files[1]}, true);  // <|endoftext|> inside the text -> 50256
}

TEST_CASE("tokenizer oracle: shared corpora", "[tokenizer]") {
  const std::string shared = TDA_SOURCE_DIR "/../shared/data";
  if (!path_exists(shared)) {
    TDA_SKIP(shared << " not found");
  }
  if (!oracle_available()) {
    TDA_SKIP(kPython << " with tiktoken not found");
  }
  check_files({shared + "/tinyshakespeare/input.txt", shared + "/enwiki_sample/wiki_00",
               shared + "/enwiki_sample/wiki_17", shared + "/enwiki_sample/wiki_49"},
              false);
}

TEST_CASE("tokenizer oracle: invalid UTF-8 matches decode(errors='replace')", "[tokenizer]") {
  if (!oracle_available()) {
    TDA_SKIP(kPython << " with tiktoken not found");
  }
  // Random mixes of ASCII words, valid multi-byte characters and broken sequences.
  // clang-format off
  const char* frags[] = {"word", " ", "  ", "\n", "\t", "'s", "12", "\x01", "\xC3\xA9",
                         "\xE6\x97\xA5", "\xF0\x9F\x98\x80", "\x80", "\xBF", "\xC0", "\xC1\x81", "\xE2\x82",
                         "\xED\xA0\x80", "\xF0\x9F", "\xF4\x90\x80\x80", "\xF8\x88\x80\x80", "\xFF",
                         "\xFE", "\xE0\x80\x80", "\xEF\xBF\xBD", "<|endoftext|>"};
  // clang-format on
  std::mt19937 rng(1234);
  std::string text;
  for (int i = 0; i < 20000; ++i) text += frags[rng() % (sizeof frags / sizeof *frags)];
  TempDir d;
  write_text(d.path + "/bad.txt", text);
  check_files({d.path + "/bad.txt"}, false);
  check_files({d.path + "/bad.txt"}, true);
}

TEST_CASE("tokenizer oracle: long runs (heap merge path, regex backtracking)", "[tokenizer]") {
  if (!oracle_available()) {
    TDA_SKIP(kPython << " with tiktoken not found");
  }
  // Pieces far longer than the 64-byte scan limit; tiktoken's merge is quadratic in the piece
  // length, so a few thousand bytes each.
  std::string text;
  auto rep = [&](const std::string& s, int n) {
    for (int i = 0; i < n; ++i) text += s;
    text += "\n";
  };
  rep("a", 3000);
  rep("ab", 1500);
  rep("1", 3000);
  rep(" ", 3000);
  text += "x";
  rep("\n", 2000);
  rep("\xF0\x9F\x98\x80", 700);
  rep("!?", 1000);
  rep("\xE6\x97\xA5", 1000);
  rep(" \t", 1000);
  TempDir d;
  write_text(d.path + "/runs.txt", text);
  check_files({d.path + "/runs.txt"}, false);
}

// Each code point next to a letter, a digit, spaces and itself, so that its \s / \p{L} / \p{N}
// class decides the pieces (this is what caught PCRE2's older Unicode tables).
static std::string code_point_sweep(uint32_t lo, uint32_t hi) {
  auto utf8 = [](uint32_t c, std::string* s) {
    if (c < 0x80) {
      *s += char(c);
    } else if (c < 0x800) {
      *s += char(0xC0 | (c >> 6));
      *s += char(0x80 | (c & 63));
    } else if (c < 0x10000) {
      *s += char(0xE0 | (c >> 12));
      *s += char(0x80 | ((c >> 6) & 63));
      *s += char(0x80 | (c & 63));
    } else {
      *s += char(0xF0 | (c >> 18));
      *s += char(0x80 | ((c >> 12) & 63));
      *s += char(0x80 | ((c >> 6) & 63));
      *s += char(0x80 | (c & 63));
    }
  };
  std::string text;
  for (uint32_t c = lo; c < hi; ++c) {
    if (c >= 0xD800 && c < 0xE000) continue;
    text += 'x';
    utf8(c, &text);
    text += '1';
    utf8(c, &text);
    text += ' ';
    utf8(c, &text);
    utf8(c, &text);
    text += " \n";
  }
  return text;
}

TEST_CASE("tokenizer oracle: every code point of the BMP", "[tokenizer]") {
  if (!oracle_available()) {
    TDA_SKIP(kPython << " with tiktoken not found");
  }
  TempDir d;
  write_text(d.path + "/bmp.txt", code_point_sweep(1, 0x10000));
  check_files({d.path + "/bmp.txt"}, false);
}

TEST_CASE("tokenizer oracle: every code point above the BMP", "[tokenizer][slow]") {
  if (!oracle_available()) {
    TDA_SKIP(kPython << " with tiktoken not found");
  }
  TempDir d;
  write_text(d.path + "/astral.txt", code_point_sweep(0x10000, 0x110000));
  check_files({d.path + "/astral.txt"}, false);
}
