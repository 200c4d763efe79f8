#include "data/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"

namespace tda {

const char* const kGpt2Pattern =
    R"('(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// The same pattern with the classes spelled so that PCRE2 puts every code point where tiktoken's
// Rust `regex` crate does (checked over all of Unicode by tests/test_tokenizer_oracle.cpp):
//  * \s: Rust uses the Unicode White_Space property (25 code points, unchanged since Unicode 6.3);
//    PCRE2's UCP \s also takes U+180E MONGOLIAN VOWEL SEPARATOR (Perl's historical set), which
//    tiktoken treats as "other". So \s is written out as White_Space.
//  * \p{L}, \p{N}: Debian 12's PCRE2 10.42 has Unicode 14 tables, tiktoken 0.14 has Unicode 16.
//    The ranges below are the code points that became letters / numbers in Unicode 15.0-16.0;
//    with a newer PCRE2 they are already in \p{L} / \p{N} and adding them changes nothing.
#define TDA_WS \
  R"(\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})"
#define TDA_L                                                                                \
  R"(\p{L}\x{1C89}-\x{1C8A}\x{A7CB}-\x{A7CD}\x{A7DA}-\x{A7DC}\x{105C0}-\x{105F3})"           \
  R"(\x{10D4A}-\x{10D65}\x{10D6F}-\x{10D85}\x{10EC2}-\x{10EC4}\x{1123F}-\x{11240})"          \
  R"(\x{11380}-\x{11389}\x{1138B}\x{1138E}\x{11390}-\x{113B5}\x{113B7}\x{113D1}\x{113D3})"   \
  R"(\x{11BC0}-\x{11BE0}\x{11F02}\x{11F04}-\x{11F10}\x{11F12}-\x{11F33}\x{1342F})"           \
  R"(\x{13441}-\x{13446}\x{13460}-\x{143FA}\x{16100}-\x{1611D}\x{16D40}-\x{16D6C}\x{18CFF})" \
  R"(\x{1B132}\x{1B155}\x{1DF25}-\x{1DF2A}\x{1E030}-\x{1E06D}\x{1E4D0}-\x{1E4EB})"           \
  R"(\x{1E5D0}-\x{1E5ED}\x{1E5F0}\x{2B739}\x{2EBF0}-\x{2EE5D}\x{31350}-\x{323AF})"
#define TDA_N                                                                            \
  R"(\p{N}\x{10D40}-\x{10D49}\x{116D0}-\x{116E3}\x{11BF0}-\x{11BF9}\x{11F50}-\x{11F59})" \
  R"(\x{16130}-\x{16139}\x{16D70}-\x{16D79}\x{1CCF0}-\x{1CCF9}\x{1D2C0}-\x{1D2D3})"      \
  R"(\x{1E4F0}-\x{1E4F9}\x{1E5F1}-\x{1E5FA})"

const char* const kGpt2PatternPcre2 =
    R"('(?:[sdmt]|ll|ve|re)| ?[)" TDA_L R"(]+| ?[)" TDA_N R"(]+| ?[^)" TDA_WS TDA_L TDA_N
    R"(]+|[)" TDA_WS R"(]+(?![^)" TDA_WS R"(])|[)" TDA_WS R"(]+)";
#undef TDA_WS
#undef TDA_L
#undef TDA_N

// ---- UTF-8 validation / replacement ----

namespace {

// Length of the valid UTF-8 sequence at p (1..4), or -k (k >= 1) when the first k bytes are the
// maximal invalid subpart to replace by one U+FFFD (the Unicode / Python convention).
int utf8_sequence(const unsigned char* p, size_t avail) {
  unsigned char b = p[0];
  if (b < 0x80) return 1;
  int need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 2;
    if (b == 0xE0) lo = 0xA0;  // overlong
    if (b == 0xED) hi = 0x9F;  // UTF-16 surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3;
    if (b == 0xF0) lo = 0x90;  // overlong
    if (b == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return -1;  // continuation byte, C0/C1 or F5..FF: never valid as a lead byte
  }
  for (int k = 1; k <= need; ++k) {
    if (size_t(k) >= avail) return -k;
    unsigned char c = p[k];
    bool ok = k == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) return -k;
  }
  return need + 1;
}

}  // namespace

std::string_view sanitize_utf8(std::string_view in, std::string* storage) {
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  size_t n = in.size(), i = 0;
  // Fast path: find the first invalid byte without copying anything.
  while (i < n) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    int len = utf8_sequence(p + i, n - i);
    if (len < 0) break;
    i += size_t(len);
  }
  if (i == n) return in;
  storage->assign(in.data(), i);
  while (i < n) {
    int len = utf8_sequence(p + i, n - i);
    if (len > 0) {
      storage->append(in.data() + i, size_t(len));
      i += size_t(len);
    } else {
      storage->append("\xEF\xBF\xBD");  // U+FFFD
      i += size_t(-len);
    }
  }
  return *storage;
}

// ---- PCRE2 ----

namespace {

// Per-thread match state: match data and the JIT stack may not be shared between threads.
struct MatchState {
  pcre2_match_data* md = nullptr;
  pcre2_match_context* mc = nullptr;
  pcre2_jit_stack* stack = nullptr;
  MatchState() {
    md = pcre2_match_data_create(1, nullptr);
    mc = pcre2_match_context_create(nullptr);
    // `\s+(?!\S)` backtracks over whitespace runs; a larger stack than the 32 KiB default keeps
    // pathological runs from failing with PCRE2_ERROR_JIT_STACKLIMIT.
    stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    pcre2_jit_stack_assign(mc, nullptr, stack);
  }
  ~MatchState() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(mc);
    pcre2_match_data_free(md);
  }
};

MatchState& match_state() {
  thread_local MatchState s;
  return s;
}

}  // namespace

Pretokenizer::Pretokenizer(const char* pattern) {
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw Error("tokenizer: bad pre-tokenisation regex at offset " + std::to_string(off) + ": " +
                reinterpret_cast<const char*>(msg));
  }
  code_ = code;
  // Without JIT (unsupported platform) the interpreter gives the same matches, only slower.
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

Pretokenizer::~Pretokenizer() {
  pcre2_code_free(static_cast<pcre2_code*>(code_));
}

bool Pretokenizer::next(std::string_view text, size_t pos, size_t* start, size_t* end) const {
  if (pos >= text.size()) return false;
  MatchState& st = match_state();
  auto* code = static_cast<pcre2_code*>(code_);
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  // The text was validated once by sanitize_utf8; PCRE2's own check would rescan the whole
  // subject on every call (quadratic).
  int rc = jit_ ? pcre2_jit_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, st.md, st.mc)
                : pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, st.md, st.mc);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof msg);
    throw Error("tokenizer: regex match failed at byte " + std::to_string(pos) + ": " +
                reinterpret_cast<const char*>(msg));
  }
  PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.md);
  *start = ov[0];
  *end = ov[1];
  // The gpt2 pattern matches every character and never matches empty, so pieces tile the text;
  // anything else would silently drop text.
  if (*start != pos || *end <= *start)
    throw Error("tokenizer: pre-tokenisation regex left a gap at byte " + std::to_string(pos));
  return true;
}

}  // namespace tda
