// `tda eval longctx`: SCROLLS QMSum / SummScreenFD / GovReport (ROUGE-1, also ROUGE-2/L and
// their geometric mean, the SCROLLS score) and Qasper (F1) on a user-supplied SCROLLS jsonl,
// run the way lm-evaluation-harness runs its SCROLLS tasks (the paper's setup):
//
//   prompt     scrolls_prompt() (eval/scrolls_data.h), GPT-2 BPE tokens;
//   truncation the prompt keeps its LAST max_context - max_new_tokens tokens (lm-eval's HF model
//              left-truncates generation contexts to max_length - max_gen_toks): the start of the
//              document is dropped, the question and "Answer:" at its end always survive;
//   generation greedy with the KV-cache Generator, until the text contains "\n" (cut there, as
//              lm-eval's until=["\n"]), <|endoftext|>, or max_new_tokens; Qasper: an answer that
//              is empty after strip() becomes "Unanswerable";
//   Qasper yes/no questions: " yes" if loglik(" yes") > loglik(" no") else " no", with lm-eval's
//              _encode_pair tokens and window (context + continuation)[-(max_context + 1):];
//   metrics    eval/longctx_metrics.h, maximised over each example's references, mean x 100.
//
// max_context defaults to the checkpoint's model.seq_len (what lm-eval reads from the export's
// config as max_length); max_new_tokens to 256 (lm-eval's max_gen_toks).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "eval/longctx_metrics.h"
#include "eval/scrolls_data.h"
#include "model/generator.h"
#include "model/gpt2.h"

namespace tda {

struct LongctxOptions {
  int max_context = 0;       // <= 0: model.seq_len
  int max_new_tokens = 256;  // generation budget, reserved out of max_context
  int limit = 0;             // first K examples (0 = all)
  bool progress = true;      // progress bar on stderr
};

struct LongctxItem {
  std::string id, prediction;
  bool yes_no = false;
  double ll_yes = 0, ll_no = 0;        // yes/no questions only
  size_t prompt_tokens = 0, kept = 0;  // before / after truncation
  ExampleScores scores;
};

struct LongctxResult {
  std::string task;
  int max_context = 0, max_new_tokens = 0;
  size_t truncated = 0;  // examples whose prompt lost tokens
  ScrollsScores scores;
  std::vector<LongctxItem> items;
};

// lm-eval's generation context: the last `keep` tokens.
std::vector<int32_t> keep_last(const std::vector<int32_t>& tokens, size_t keep);

// Greedy answer after `prompt` (already truncated): the decoded text up to the first "\n".
std::string greedy_answer(Generator& gen, const Gpt2Tokenizer& tok,
                          const std::vector<int32_t>& prompt, int max_new_tokens);

// Summed log p(continuation | context) with lm-eval's window, for each continuation.
std::vector<double> continuation_logliks(Generator& gen, const Gpt2Tokenizer& tok,
                                         const std::string& context,
                                         const std::vector<std::string>& continuations);

LongctxResult run_longctx(GPT2& model, const Gpt2Tokenizer& tok, const ScrollsDataset& d,
                          const LongctxOptions& o);

}  // namespace tda
