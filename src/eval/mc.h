// Zero-shot multiple-choice scoring as lm-evaluation-harness (v0.4) does it:
//   loglik(choice) = sum of log p(continuation tokens | context), tokens from _encode_pair:
//     trailing whitespace of the context moves to the continuation; whole = enc(ctx + cont),
//     ctx_enc = enc(ctx), cont_enc = whole[len(ctx_enc):]; an empty context becomes [EOT];
//     the window is (ctx_enc + cont_enc)[-(seq_len+1):] (left truncation), input = window[:-1].
//   acc      = [argmax_c loglik(c) == gold]           (first maximum on ties, as np.argmax)
//   acc_norm = [argmax_c loglik(c) / len(choice c) == gold], len in Unicode code points of the
//              choice text without the " " target delimiter (lm-eval's completion_len)
//   stderr   = sample standard deviation (n-1) / sqrt(n)
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "eval/mc_data.h"
#include "model/gpt2.h"

namespace tda {

struct LoglikRequest {
  std::vector<int32_t> context, continuation;
};

// lm-eval's _encode_pair.
LoglikRequest encode_pair(const Gpt2Tokenizer& tok, const std::string& context,
                          const std::string& continuation);

// Summed continuation log-probabilities (natural log), one per request. Requests are sorted by
// length and packed into batches of at most batch_tokens (rows padded on the right, which a
// causal model never sees). progress(done, total) is called after each batch.
std::vector<double> score_loglik(GPT2& model, const std::vector<LoglikRequest>& reqs,
                                 int batch_tokens,
                                 const std::function<void(size_t, size_t)>& progress = {});

// Index of the first maximum of v[i] / (norm ? norm[i] : 1).
int argmax_first(const std::vector<double>& v, const std::vector<double>* norm = nullptr);
// lm-eval's completion_len: code points of the continuation without one leading " ".
double completion_len(const std::string& continuation);

struct McResult {
  std::string task;
  size_t n = 0, excluded = 0, truncated = 0;
  double acc = 0, acc_stderr = 0, acc_norm = 0, acc_norm_stderr = 0;
  std::vector<std::vector<double>> logliks;  // per scored item, per choice
  std::vector<int> pred, pred_norm, gold;    // per scored item
};

struct McRunOptions {
  int limit = 0;            // first N items (0 = all)
  int batch_tokens = 4096;  // tokens per forward
  bool progress = true;     // progress bar on stderr
};

McResult run_mc(GPT2& model, const Gpt2Tokenizer& tok, const McDataset& d, const McRunOptions& o);

}  // namespace tda
