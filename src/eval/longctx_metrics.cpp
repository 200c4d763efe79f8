#include "eval/longctx_metrics.h"

#include <locale.h>
#include <wctype.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace tda {

namespace {

// UTF-8 -> code points; an invalid or truncated sequence becomes one U+FFFD per bad byte
// (decoded model output can end inside a multi-byte character).
std::u32string decode_utf8(const std::string& s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    char32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    bool ok = len > 0 && i + size_t(len) <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      const unsigned char cb = static_cast<unsigned char>(s[i + size_t(k)]);
      ok = (cb >> 6) == 2;
      c = (c << 6) | (cb & 0x3F);
    }
    if (!ok) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    out.push_back(c);
    i += size_t(len);
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(char(c));
  } else if (c < 0x800) {
    out.push_back(char(0xC0 | (c >> 6)));
    out.push_back(char(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(char(0xE0 | (c >> 12)));
    out.push_back(char(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(char(0x80 | (c & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (c >> 18)));
    out.push_back(char(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(char(0x80 | (c & 0x3F)));
  }
}

// The C library's Unicode character tables, whatever the process locale is (null if the system
// has no C.UTF-8: then non-ASCII characters keep their case and count as word characters).
locale_t utf8_ctype() {
  static locale_t l = newlocale(LC_CTYPE_MASK, "C.UTF-8", locale_t(nullptr));
  return l;
}

// Python's str.lower() of one code point, appended to out.
void py_lower_into(char32_t c, std::u32string& out) {
  if (c < 0x80) {
    out.push_back(c >= 'A' && c <= 'Z' ? c + 32 : c);
  } else if (c == 0x130) {  // LATIN CAPITAL I WITH DOT ABOVE: the one 1 -> 2 mapping
    out.push_back('i');
    out.push_back(0x307);
  } else {
    locale_t l = utf8_ctype();
    out.push_back(l ? char32_t(towlower_l(wint_t(c), l)) : c);
  }
}

// Python re's \w for str patterns: alphanumeric or underscore.
bool py_word_char(char32_t c) {
  if (c < 0x80)
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  locale_t l = utf8_ctype();
  return l ? iswalnum_l(wint_t(c), l) != 0 : true;
}

// Python's str.isspace() (what str.split() splits on).
bool py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// Python's string.punctuation.
bool ascii_punct(char32_t c) {
  return c < 0x80 &&
         std::string(R"(!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~)").find(char(c)) != std::string::npos;
}

std::vector<std::string> split_py_space(const std::u32string& s) {
  std::vector<std::string> out;
  std::string cur;
  bool in = false;
  for (char32_t c : s) {
    if (py_space(c)) {
      if (in) out.push_back(cur);
      cur.clear();
      in = false;
    } else {
      append_utf8(cur, c);
      in = true;
    }
  }
  if (in) out.push_back(cur);
  return out;
}

double fmeasure(double p, double r) {
  return p + r > 0 ? 2 * p * r / (p + r) : 0.0;
}

RougePRF rouge_n(const std::vector<std::string>& target, const std::vector<std::string>& pred,
                 size_t n) {
  auto grams = [n](const std::vector<std::string>& t) {
    std::unordered_map<std::string, long> c;
    for (size_t i = 0; i + n <= t.size(); ++i) {
      std::string g = t[i];
      for (size_t k = 1; k < n; ++k) g += ' ' + t[i + k];  // tokens hold no spaces
      ++c[g];
    }
    return c;
  };
  const auto tg = grams(target), pg = grams(pred);
  long inter = 0, tcount = 0, pcount = 0;
  for (const auto& kv : tg) {
    tcount += kv.second;
    auto it = pg.find(kv.first);
    if (it != pg.end()) inter += std::min(kv.second, it->second);
  }
  for (const auto& kv : pg) pcount += kv.second;
  RougePRF r;
  r.precision = double(inter) / double(std::max(pcount, 1L));
  r.recall = double(inter) / double(std::max(tcount, 1L));
  r.fmeasure = fmeasure(r.precision, r.recall);
  return r;
}

// Length of the longest common subsequence, two DP rows.
size_t lcs_length(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<size_t> prev(b.size() + 1, 0), cur(b.size() + 1, 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = a[i - 1] == b[j - 1] ? prev[j - 1] + 1 : std::max(prev[j], cur[j - 1]);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::vector<std::string> rouge_tokenize(const std::string& text) {
  // Only three kinds of code point lower-case into [a-z0-9]: ASCII letters and digits,
  // U+0130 (-> "i" + U+0307) and U+212A KELVIN SIGN (-> "k"). Everything else separates.
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) out.push_back(cur);
    cur.clear();
  };
  for (char32_t c : decode_utf8(text)) {
    char a = 0;
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
      a = char(c);
    else if (c >= 'A' && c <= 'Z')
      a = char(c + 32);
    else if (c == 0x212A)
      a = 'k';
    if (a) {
      cur.push_back(a);
    } else if (c == 0x130) {
      cur.push_back('i');
      flush();  // the combining dot that follows separates
    } else {
      flush();
    }
  }
  flush();
  return out;
}

RougeScores rouge(const std::string& target, const std::string& prediction) {
  const auto t = rouge_tokenize(target), p = rouge_tokenize(prediction);
  RougeScores s;
  s.rouge1 = rouge_n(t, p, 1);
  s.rouge2 = rouge_n(t, p, 2);
  if (!t.empty() && !p.empty()) {
    const double l = double(lcs_length(t, p));
    s.rougeL.precision = l / double(p.size());
    s.rougeL.recall = l / double(t.size());
    s.rougeL.fmeasure = fmeasure(s.rougeL.precision, s.rougeL.recall);
  }
  return s;
}

std::string squad_normalize(const std::string& text) {
  std::u32string lowered, nopunct;
  for (char32_t c : decode_utf8(text)) py_lower_into(c, lowered);
  for (char32_t c : lowered)
    if (!ascii_punct(c)) nopunct.push_back(c);
  // re.sub(r"\b(a|an|the)\b", " ", s): a whole word "a", "an" or "the" becomes one space.
  std::u32string noart;
  const size_t n = nopunct.size();
  for (size_t i = 0; i < n;) {
    const bool starts_word = py_word_char(nopunct[i]) && (i == 0 || !py_word_char(nopunct[i - 1]));
    size_t len = 0;
    if (starts_word)
      for (const std::u32string art : {U"a", U"an", U"the"})
        if (nopunct.compare(i, art.size(), art) == 0 &&
            (i + art.size() == n || !py_word_char(nopunct[i + art.size()])))
          len = art.size();
    if (len) {
      noart.push_back(' ');
      i += len;
    } else {
      noart.push_back(nopunct[i++]);
    }
  }
  std::string out;
  for (const auto& w : split_py_space(noart)) out += (out.empty() ? "" : " ") + w;
  return out;
}

double squad_f1(const std::string& prediction, const std::string& ground_truth) {
  const auto p = split_py_space(decode_utf8(squad_normalize(prediction)));
  const auto g = split_py_space(decode_utf8(squad_normalize(ground_truth)));
  std::unordered_map<std::string, long> cp, cg;
  for (const auto& w : p) ++cp[w];
  for (const auto& w : g) ++cg[w];
  long same = 0;
  for (const auto& kv : cp) {
    auto it = cg.find(kv.first);
    if (it != cg.end()) same += std::min(kv.second, it->second);
  }
  if (same == 0) return 0.0;
  const double precision = 1.0 * double(same) / double(p.size());
  const double recall = 1.0 * double(same) / double(g.size());
  return (2 * precision * recall) / (precision + recall);
}

ExampleScores score_example(const std::string& prediction, const std::vector<std::string>& refs) {
  ExampleScores e;
  for (const auto& r : refs) {
    const RougeScores s = rouge(r, prediction);
    e.rouge1 = std::max(e.rouge1, s.rouge1.fmeasure);
    e.rouge2 = std::max(e.rouge2, s.rouge2.fmeasure);
    e.rougeL = std::max(e.rougeL, s.rougeL.fmeasure);
    e.f1 = std::max(e.f1, squad_f1(prediction, r));
  }
  return e;
}

ScrollsScores aggregate_scrolls(const std::vector<ExampleScores>& ex) {
  ScrollsScores s;
  s.n = ex.size();
  if (ex.empty()) return s;
  // Summation order as SCROLLS: ROUGE sums the per-example percentages; F1 sums fractions and
  // scales at the end (100 * sum / n).
  double r1 = 0, r2 = 0, rl = 0, f1 = 0;
  for (const auto& e : ex) {
    r1 += e.rouge1 * 100;
    r2 += e.rouge2 * 100;
    rl += e.rougeL * 100;
    f1 += e.f1;
  }
  const double n = double(ex.size());
  s.rouge1 = r1 / n;
  s.rouge2 = r2 / n;
  s.rougeL = rl / n;
  s.rouge_geometric_mean = std::pow(s.rouge1 * s.rouge2 * s.rougeL, 1.0 / 3.0);
  s.f1 = 100.0 * f1 / n;
  return s;
}

}  // namespace tda
