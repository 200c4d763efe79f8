// Exact GPT-2 tokenizer: byte-level BPE over tiktoken's `gpt2` pre-tokenisation regex, giving the
// same ids as tiktoken.get_encoding("gpt2") (tested token for token; see docs/tokenizer.md).
//
// Byte input: text is UTF-8. Invalid UTF-8 is not an error: each maximal invalid subpart is
// replaced by U+FFFD first, exactly as Python's bytes.decode("utf-8", errors="replace"), so
// encode(b) == tiktoken encode(b.decode("utf-8", "replace")). decode() returns raw bytes (it may
// end in the middle of a character when given a prefix of a token sequence).
//
// Thread safety: a loaded tokenizer is immutable; encode/decode may run on many threads at once.
// Each thread keeps its own piece -> tokens cache, so no locks are taken on the hot path.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tda {

class Gpt2Tokenizer {
 public:
  // dir holds encoder.json + vocab.bpe; throws tda::Error naming the file on bad input.
  static Gpt2Tokenizer load(const std::string& dir);
  static std::string default_dir();  // TDA_SOURCE_DIR "/data/gpt2_tokenizer"

  // allow_special: "<|endoftext|>" in the text becomes id 50256 (tiktoken's
  // encode(allowed_special="all")); otherwise it is encoded as ordinary text
  // (tiktoken's encode_ordinary).
  std::vector<int32_t> encode(const std::string& text, bool allow_special = true) const;
  // Appends to *out instead of returning (avoids a copy per document in the shard writer).
  void encode_into(const std::string& text, bool allow_special, std::vector<int32_t>* out) const;
  // Throws tda::Error for an id outside [0, vocab_size()).
  std::string decode(const std::vector<int32_t>& ids) const;
  int eot() const { return 50256; }
  int vocab_size() const;  // 50257

  struct Impl;

 private:
  std::shared_ptr<const Impl> impl_;
};

}  // namespace tda
