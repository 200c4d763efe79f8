// GPT-2 pre-tokenisation: split text into the pieces BPE works on, with tiktoken's `gpt2` regex
// run by PCRE2 (UTF + UCP, so \s, \p{L}, \p{N} are Unicode classes; JIT-compiled).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace tda {

// tiktoken's gpt2 / r50k_base pattern, character for character.
extern const char* const kGpt2Pattern;
// kGpt2Pattern with \s, \p{L}, \p{N} written out so PCRE2 classifies every code point as
// tiktoken does (see pretokenize.cpp for why they differ). The default.
extern const char* const kGpt2PatternPcre2;

// Returns `in` when it is valid UTF-8; otherwise writes into *storage a copy in which every
// invalid sequence is replaced by U+FFFD exactly as Python's bytes.decode("utf-8", "replace")
// does (one U+FFFD per maximal invalid subpart; surrogates, overlongs and code points above
// U+10FFFF are invalid), and returns a view of *storage.
std::string_view sanitize_utf8(std::string_view in, std::string* storage);

class Pretokenizer {
 public:
  explicit Pretokenizer(const char* pattern = kGpt2PatternPcre2);
  ~Pretokenizer();
  Pretokenizer(const Pretokenizer&) = delete;
  Pretokenizer& operator=(const Pretokenizer&) = delete;

  // Calls fn(std::string_view piece) for each regex match in `text`, which must be valid UTF-8
  // (see sanitize_utf8). Safe to call from many threads at once.
  template <class F>
  void split(std::string_view text, F&& fn) const {
    size_t pos = 0, start, end;
    while (next(text, pos, &start, &end)) {
      fn(text.substr(start, end - start));
      pos = end;
    }
  }

 private:
  // Finds the first match at or after pos; false at the end of the text.
  bool next(std::string_view text, size_t pos, size_t* start, size_t* end) const;
  void* code_ = nullptr;  // pcre2_code_8*, kept opaque so pcre2.h stays out of this header
  bool jit_ = false;
};

}  // namespace tda
