// Passkey retrieval (the paper's appendix "Details in Passkey Retrieval Tests";
// docs/evaluation.md).
//
// One needle: the prompt is five newline-joined blocks
//   instruction \n garbage_prefix \n needle \n garbage_suffix \n question
//   instruction  "There is an important info hidden inside a lot of irrelevant text. Find it and
//                 memorize them. I will quiz you about the important information there."
//   garbage      the first n characters of the base sentence "The grass is green. The sky is
//                 blue. The sun is yellow. Here we go. There and back again." repeated (joined by
//                 one space, ASSUMED); prefix and suffix are both cut from the start of that
//                 buffer, n_prefix + n_suffix = n_garbage, n_prefix uniform in {0..n_garbage}
//   needle       "The pass key is X. Remember it. X is the pass key."   X ~ Unif{1..50000}
//                 (the appendix's {x} is the substitution, as in the original f-string)
//   question     "What is the pass key? The pass key is"
// Greedy decoding; a trial is correct when the stripped answer equals X or the first integer in
// the answer equals X.
//
// k > 1 needles (the paper gives no strings; ASSUMED here): needle j (1-based) reads
// "The pass key number j is X_j. Remember it. X_j is the pass key number j." and sits at a
// uniform position inside the j-th of k equal slices of the garbage span (widely separated);
// k + 1 garbage pieces, each cut from the buffer start. Every needle is asked in its own prompt
// "What is the pass key number j? The pass key number j is" over the same haystack, and the
// accuracy is the mean over all (trial, needle) answers. k = 1 is exactly the paper's prompt.
//
// Length targeting: n_garbage is chosen per trial so that the prompt (the question about needle 1)
// has T - kLengthSlack <= tokens <= T GPT-2 tokens (no BOS). The search starts from the garbage's
// chars-per-token ratio and corrects with the measured count.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/rng.h"

namespace tda {

namespace passkey {
extern const char* const kInstruction;
extern const char* const kGarbageSentence;
constexpr int kMaxKey = 50000;
constexpr int kLengthSlack = 4;
}  // namespace passkey

// The first n characters of the repeated garbage buffer.
std::string passkey_garbage(size_t n);
// Needle line and question for needle j (0-based) of k.
std::string passkey_needle(int key, int j, int k);
std::string passkey_question(int j, int k);
// instruction \n g_0 \n needle_0 \n g_1 ... needle_{k-1} \n g_k \n question(ask): garbage piece i
// is passkey_garbage(pieces[i]); pieces.size() == keys.size() + 1.
std::string passkey_prompt(const std::vector<int>& keys, const std::vector<size_t>& pieces,
                           int ask);

struct PasskeyTrial {
  int target = 0;                    // requested prompt length in tokens
  int tokens = 0;                    // actual token count of prompts[0]
  size_t n_garbage = 0;              // garbage characters in total
  std::vector<int> keys;             // one per needle
  std::vector<size_t> pieces;        // garbage piece lengths (k + 1)
  std::vector<std::string> prompts;  // prompts[j] asks for needle j
};

// Builds trials; count_tokens(text) is the tokenizer's token count of a prompt.
class PasskeyPromptBuilder {
 public:
  explicit PasskeyPromptBuilder(std::function<int(const std::string&)> count_tokens);
  // Draws the keys and needle positions from rng, then sizes the garbage for `target` tokens.
  // Throws when target is shorter than the prompt without garbage.
  PasskeyTrial make_trial(int target, int needles, Rng& rng) const;

 private:
  std::function<int(const std::string&)> count_;
  double chars_per_token_;
};

// Exact match after stripping whitespace, or the first integer in the answer equals key.
bool passkey_answer_correct(const std::string& answer, int key);

// Whatever answers the prompts of a trial: answers[j] is the text generated for prompts[j].
class PasskeyAnswerer {
 public:
  virtual ~PasskeyAnswerer() = default;
  virtual std::vector<std::string> answer(const PasskeyTrial& t) = 0;
};

struct PasskeyOptions {
  std::vector<int> lengths;
  int trials = 100;
  int needles = 1;
  uint64_t seed = 1234;
  std::function<void(int length, int done, int total)> progress;  // after each trial
};

struct PasskeyLengthResult {
  int length = 0;
  int correct = 0, total = 0;  // (trial, needle) answers
  double accuracy = 0;         // correct / total
  int tokens_min = 0, tokens_max = 0;
  double tokens_mean = 0;
  double seconds = 0;
  std::vector<PasskeyTrial> trials;
  std::vector<std::vector<std::string>> answers;
};

// Trials of each length use their own RNG stream (seed, length): a length's prompts do not
// depend on which other lengths run.
std::vector<PasskeyLengthResult> run_passkey(const PasskeyOptions& o,
                                             const PasskeyPromptBuilder& builder,
                                             PasskeyAnswerer& answerer);

}  // namespace tda
