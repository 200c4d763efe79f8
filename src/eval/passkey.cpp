#include "eval/passkey.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>

#include "core/error.h"

namespace tda {

namespace passkey {
const char* const kInstruction =
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize "
    "them. I will quiz you about the important information there.";
const char* const kGarbageSentence =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
}  // namespace passkey

std::string passkey_garbage(size_t n) {
  const std::string unit = std::string(passkey::kGarbageSentence) + " ";
  std::string s;
  s.reserve(n + unit.size());
  while (s.size() < n) s += unit;
  s.resize(n);
  return s;
}

std::string passkey_needle(int key, int j, int k) {
  const std::string x = std::to_string(key);
  if (k == 1) return "The pass key is " + x + ". Remember it. " + x + " is the pass key.";
  const std::string n = std::to_string(j + 1);
  return "The pass key number " + n + " is " + x + ". Remember it. " + x +
         " is the pass key number " + n + ".";
}

std::string passkey_question(int j, int k) {
  if (k == 1) return "What is the pass key? The pass key is";
  const std::string n = std::to_string(j + 1);
  return "What is the pass key number " + n + "? The pass key number " + n + " is";
}

std::string passkey_prompt(const std::vector<int>& keys, const std::vector<size_t>& pieces,
                           int ask) {
  const int k = int(keys.size());
  TDA_CHECK(k >= 1 && pieces.size() == keys.size() + 1, "passkey: k keys need k + 1 pieces");
  std::string p = std::string(passkey::kInstruction) + "\n" + passkey_garbage(pieces[0]);
  for (int j = 0; j < k; ++j)
    p += "\n" + passkey_needle(keys[size_t(j)], j, k) + "\n" +
         passkey_garbage(pieces[size_t(j + 1)]);
  return p + "\n" + passkey_question(ask, k);
}

PasskeyPromptBuilder::PasskeyPromptBuilder(std::function<int(const std::string&)> count_tokens)
    : count_(std::move(count_tokens)) {
  const std::string g = passkey_garbage(8900);  // 100 periods of the base sentence
  chars_per_token_ = double(g.size()) / double(std::max(1, count_(g)));
}

namespace {
// Cut points of k needles in a garbage span of n characters: needle j at a uniform position of
// the j-th of k equal slices, from fractions u_j in [0, 1). k = 1: n_prefix uniform in {0..n}.
std::vector<size_t> pieces_for(size_t n, const std::vector<double>& u) {
  const size_t k = u.size();
  std::vector<size_t> cut(k), pieces;
  for (size_t j = 0; j < k; ++j)
    cut[j] = std::min(n, size_t((double(j) + u[j]) * double(n + 1) / double(k)));
  size_t prev = 0;
  for (size_t j = 0; j < k; ++j) {
    pieces.push_back(cut[j] - prev);
    prev = cut[j];
  }
  pieces.push_back(n - prev);
  return pieces;
}
}  // namespace

PasskeyTrial PasskeyPromptBuilder::make_trial(int target, int needles, Rng& rng) const {
  TDA_CHECK(needles >= 1, "passkey: needles must be >= 1");
  PasskeyTrial t;
  t.target = target;
  std::vector<double> u(static_cast<size_t>(needles));
  for (int j = 0; j < needles; ++j) {
    t.keys.push_back(1 + int(rng.below(passkey::kMaxKey)));  // Unif{1..50000}
    u[size_t(j)] = rng.uniform_double();
  }
  const auto count_at = [&](size_t n) {
    return count_(passkey_prompt(t.keys, pieces_for(n, u), 0));
  };
  const int base = count_at(0);
  TDA_CHECK(base <= target, "passkey: length " + std::to_string(target) +
                                " is shorter than the prompt without garbage (" +
                                std::to_string(base) + " tokens)");
  // Secant-like search on n with the chars/token ratio; keep the best count <= target.
  long n = std::lround((target - base) * chars_per_token_);
  long best_n = 0;
  int best = base;
  for (int it = 0; it < 12 && best < target - passkey::kLengthSlack; ++it) {
    n = std::max(0L, n);
    const int c = count_at(size_t(n));
    if (c <= target && c > best) {
      best = c;
      best_n = n;
    }
    const long step = std::lround((target - c) * chars_per_token_);
    n += step != 0 ? step : (c > target ? -1 : 1);
  }
  TDA_CHECK(best >= target - passkey::kLengthSlack,
            "passkey: could not size the prompt for " + std::to_string(target) + " tokens");
  t.n_garbage = size_t(best_n);
  t.pieces = pieces_for(t.n_garbage, u);
  t.tokens = best;
  for (int j = 0; j < needles; ++j) t.prompts.push_back(passkey_prompt(t.keys, t.pieces, j));
  return t;
}

bool passkey_answer_correct(const std::string& answer, int key) {
  size_t b = 0, e = answer.size();
  while (b < e && std::isspace(static_cast<unsigned char>(answer[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(answer[e - 1]))) --e;
  const std::string want = std::to_string(key);
  if (answer.compare(b, e - b, want) == 0 && e - b == want.size()) return true;
  // first maximal run of digits, compared as an integer (leading zeros ignored)
  size_t i = answer.find_first_of("0123456789");
  if (i == std::string::npos) return false;
  size_t j = i;
  while (j < answer.size() && std::isdigit(static_cast<unsigned char>(answer[j]))) ++j;
  while (i + 1 < j && answer[i] == '0') ++i;
  return answer.compare(i, j - i, want) == 0 && j - i == want.size();
}

std::vector<PasskeyLengthResult> run_passkey(const PasskeyOptions& o,
                                             const PasskeyPromptBuilder& builder,
                                             PasskeyAnswerer& answerer) {
  TDA_CHECK(o.trials >= 1, "passkey: trials must be >= 1");
  std::vector<PasskeyLengthResult> out;
  for (int len : o.lengths) {
    const auto t0 = std::chrono::steady_clock::now();
    Rng rng(o.seed * 1000003ULL + uint64_t(len));
    PasskeyLengthResult r;
    r.length = len;
    r.tokens_min = len;
    double tok_sum = 0;
    for (int i = 0; i < o.trials; ++i) {
      PasskeyTrial t = builder.make_trial(len, o.needles, rng);
      std::vector<std::string> ans = answerer.answer(t);
      TDA_CHECK(ans.size() == t.keys.size(), "passkey: one answer per needle expected");
      for (size_t j = 0; j < ans.size(); ++j)
        r.correct += passkey_answer_correct(ans[j], t.keys[j]);
      r.total += int(ans.size());
      r.tokens_min = std::min(r.tokens_min, t.tokens);
      r.tokens_max = std::max(r.tokens_max, t.tokens);
      tok_sum += t.tokens;
      r.trials.push_back(std::move(t));
      r.answers.push_back(std::move(ans));
      if (o.progress) o.progress(len, i + 1, o.trials);
    }
    r.accuracy = double(r.correct) / double(r.total);
    r.tokens_mean = tok_sum / o.trials;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace tda
