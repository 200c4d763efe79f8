// SCROLLS metrics (Shaham et al. 2022, the benchmark's metrics/scrolls.py), as the paper reports
// them: ROUGE-1 for the summarisation tasks (QMSum, SummScreenFD, GovReport) and token F1 for
// Qasper. Scores are in percent; an example with several references takes the maximum over them.
//
// ROUGE (the `rouge_score` package, which SCROLLS calls with use_stemmer=False):
//   tokens  = maximal runs of [a-z0-9] in text.lower()   (everything else separates; no stemming)
//   overlap = sum over n-grams g of min(count_ref(g), count_pred(g))
//   P = overlap / max(#pred n-grams, 1), R = overlap / max(#ref n-grams, 1),
//   F = 2PR / (P + R), 0 when P + R = 0.   ROUGE-L: overlap = LCS length of the token lists.
//   SCROLLS maximises each of rouge1/rouge2/rougeL over the references separately and reports
//   the geometric mean of the three as the task score. (SCROLLS first puts each sentence on its
//   own line with nltk's sent_tokenize; that only matters for rougeLsum, not computed here.)
//
// F1 (SQuAD v1.1 evaluation, SCROLLS metrics/f1.py):
//   normalize(s) = white_space_fix(remove_articles(remove_punc(s.lower())))
//     remove_punc: drop the 32 ASCII punctuation characters of Python's string.punctuation
//     remove_articles: \b(a|an|the)\b -> " "  (Unicode word boundaries)
//     white_space_fix: split on Unicode whitespace (str.split()), join with single spaces
//   common = multiset intersection of the whitespace tokens; 0 if empty, else
//   F1 = 2PR / (P + R) with P = common / #pred tokens, R = common / #ref tokens.
//
// Text is UTF-8. Lower-casing and word characters beyond ASCII follow the C library's C.UTF-8
// tables plus Python's one multi-character lower-case mapping (U+0130 -> "i" U+0307); for the
// ROUGE tokens (ASCII only) this is exact, for F1 it matches Python wherever glibc's Unicode
// tables do.
#pragma once
#include <string>
#include <vector>

namespace tda {

struct RougePRF {
  double precision = 0, recall = 0, fmeasure = 0;
};

struct RougeScores {
  RougePRF rouge1, rouge2, rougeL;
};

// rouge_score's tokenizer without stemming.
std::vector<std::string> rouge_tokenize(const std::string& text);
// rouge_score.RougeScorer(["rouge1", "rouge2", "rougeL"]).score(target, prediction).
RougeScores rouge(const std::string& target, const std::string& prediction);

// SQuAD's normalize_answer and f1_score.
std::string squad_normalize(const std::string& text);
double squad_f1(const std::string& prediction, const std::string& ground_truth);

// Per-example scores, already maximised over the references (fractions, not percent).
struct ExampleScores {
  double rouge1 = 0, rouge2 = 0, rougeL = 0, f1 = 0;
};
ExampleScores score_example(const std::string& prediction, const std::vector<std::string>& refs);

// Means over examples in percent, as SCROLLS reports them.
struct ScrollsScores {
  size_t n = 0;
  double rouge1 = 0, rouge2 = 0, rougeL = 0, rouge_geometric_mean = 0, f1 = 0;
};
ScrollsScores aggregate_scrolls(const std::vector<ExampleScores>& examples);

}  // namespace tda
