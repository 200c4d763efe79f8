// The GPT-2 tokenizer (src/data/tokenizer.h) on arbitrary bytes: decode(encode(b)) == b for valid
// UTF-8 (and for invalid UTF-8, encoding is idempotent after the U+FFFD replacement), with and
// without special tokens; decode of arbitrary ids throws tda::Error outside the vocabulary.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "fuzz_util.h"

namespace {

const tda::Gpt2Tokenizer& tok() {
  // Read once, from the repository (reading is fine: the targets write nothing).
  static const tda::Gpt2Tokenizer t =
      tda::Gpt2Tokenizer::load(TDA_SOURCE_DIR "/data/gpt2_tokenizer");
  return t;
}

// RFC 3629 UTF-8 (no surrogates, no overlong forms, <= U+10FFFF), what Python's decoder accepts.
bool valid_utf8(const std::string& s) {
  static const unsigned kMin[4] = {0, 0x80, 0x800, 0x10000};
  for (size_t i = 0; i < s.size();) {
    const unsigned c = static_cast<unsigned char>(s[i]);
    size_t n;
    unsigned cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;
    for (size_t k = 1; k <= n; ++k) {
      const unsigned x = static_cast<unsigned char>(s[i + k]);
      if ((x & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (x & 0x3f);
    }
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n + 1;
  }
  return true;
}

}  // namespace

// Loading the vocabulary takes seconds under ASan: before the first input, not inside its
// time limit.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tok();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  tda_fuzz::expect_clean([&] {
    for (bool special : {false, true}) {
      const std::vector<int32_t> ids = tok().encode(in, special);
      for (int32_t id : ids)
        if (id < 0 || id >= tok().vocab_size() || (!special && id == tok().eot())) __builtin_trap();
      const std::string back = tok().decode(ids);
      if (valid_utf8(in)) {
        if (back != in) __builtin_trap();  // the round trip is exact on valid text
      } else if (!valid_utf8(back) || tok().encode(back, special) != ids) {
        __builtin_trap();  // invalid bytes became U+FFFD once, and only once
      }
    }
    // Arbitrary ids (two bytes each, some beyond the vocabulary): decode or a tda::Error.
    std::vector<int32_t> ids;
    for (size_t i = 0; i + 1 < size && ids.size() < 256; i += 2)
      ids.push_back(int32_t((data[i] | (data[i + 1] << 8)) % 50300));
    (void)tok().decode(ids);
  });
  return 0;
}
