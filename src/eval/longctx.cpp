#include "eval/longctx.h"

#include <algorithm>
#include <cmath>
#include <iostream>

#include "core/error.h"
#include "eval/mc.h"

namespace tda {

namespace {

// log softmax over the real vocabulary (the padded ids never take probability mass).
double log_prob(const float* logits, int V, int32_t token) {
  double mx = logits[0];
  for (int v = 1; v < V; ++v) mx = std::max(mx, double(logits[v]));
  double s = 0;
  for (int v = 0; v < V; ++v) s += std::exp(double(logits[v]) - mx);
  return double(logits[token]) - mx - std::log(s);
}

bool blank(const std::string& s) {
  return s.find_first_not_of(" \t\n\r\v\f") == std::string::npos;
}

void show_progress(const std::string& task, size_t done, size_t total) {
  const int width = 30, f = int(width * double(done) / double(std::max<size_t>(total, 1)));
  std::cerr << "\r[" << task << "] [" << std::string(size_t(f), '#')
            << std::string(size_t(width - f), ' ') << "] " << done << "/" << total << std::flush;
  if (done == total) std::cerr << "\n";
}

}  // namespace

std::vector<int32_t> keep_last(const std::vector<int32_t>& tokens, size_t keep) {
  const size_t k = std::min(keep, tokens.size());
  return std::vector<int32_t>(tokens.end() - long(k), tokens.end());
}

std::string greedy_answer(Generator& gen, const Gpt2Tokenizer& tok,
                          const std::vector<int32_t>& prompt, int max_new_tokens) {
  TDA_CHECK(!prompt.empty(), "eval longctx: empty prompt");
  TDA_CHECK(int(prompt.size()) + max_new_tokens <= gen.max_context(),
            "eval longctx: prompt + max_new_tokens exceed the context");
  gen.prefill(prompt);
  GenerateOptions go;  // greedy by default
  go.max_new_tokens = max_new_tokens;
  go.stop_tokens = {tok.eot()};
  go.stop_when = [&](const std::vector<int32_t>& out) {
    return tok.decode(out).find('\n') != std::string::npos;
  };
  std::vector<int32_t> out = decode(gen, go);
  if (!out.empty() && out.back() == tok.eot()) out.pop_back();
  const std::string text = tok.decode(out);
  return text.substr(0, text.find('\n'));
}

std::vector<double> continuation_logliks(Generator& gen, const Gpt2Tokenizer& tok,
                                         const std::string& context,
                                         const std::vector<std::string>& continuations) {
  const int V = gen.model().config().real_vocab_size;
  const size_t max_ctx = size_t(gen.max_context());
  std::vector<double> out;
  for (const auto& c : continuations) {
    const LoglikRequest r = encode_pair(tok, context, c);
    TDA_CHECK(!r.continuation.empty() && r.continuation.size() <= max_ctx,
              "eval longctx: continuation '" + c + "' does not fit the context");
    std::vector<int32_t> full = r.context;
    full.insert(full.end(), r.continuation.begin(), r.continuation.end());
    // (context + continuation)[-(max_context + 1):]; the model reads all but the last token.
    const std::vector<int32_t> win = keep_last(full, max_ctx + 1);
    const std::vector<int32_t> ctx(win.begin(), win.end() - long(r.continuation.size()));
    const float* logits = gen.prefill(ctx);
    double ll = 0;
    for (size_t k = 0; k < r.continuation.size(); ++k) {
      if (k > 0) logits = gen.step(r.continuation[k - 1]);
      ll += log_prob(logits, V, r.continuation[k]);
    }
    out.push_back(ll);
  }
  return out;
}

LongctxResult run_longctx(GPT2& model, const Gpt2Tokenizer& tok, const ScrollsDataset& d,
                          const LongctxOptions& o) {
  LongctxResult res;
  res.task = d.task;
  res.max_context = o.max_context > 0 ? o.max_context : model.config().seq_len;
  res.max_new_tokens = o.max_new_tokens;
  TDA_CHECK(o.max_new_tokens >= 1 && o.max_new_tokens < res.max_context,
            "eval longctx: --max-new-tokens must be in [1, max-context), got " +
                std::to_string(o.max_new_tokens));
  const bool summary = scrolls_is_summary(d.task);
  Generator gen(model, res.max_context);
  const size_t n = o.limit > 0 ? std::min(d.examples.size(), size_t(o.limit)) : d.examples.size();
  std::vector<ExampleScores> scores;
  for (size_t i = 0; i < n; ++i) {
    const ScrollsExample& ex = d.examples[i];
    const ScrollsPrompt p = scrolls_prompt(d.task, ex);
    LongctxItem it;
    it.id = ex.id;
    it.yes_no = p.yes_no;
    const std::vector<int32_t> toks = tok.encode(p.text);
    it.prompt_tokens = toks.size();
    if (p.yes_no) {
      const std::vector<double> ll = continuation_logliks(gen, tok, p.text, {" yes", " no"});
      it.ll_yes = ll[0];
      it.ll_no = ll[1];
      it.prediction = ll[0] > ll[1] ? " yes" : " no";
      it.kept = std::min(toks.size(), size_t(res.max_context));
    } else {
      const std::vector<int32_t> kept = keep_last(toks, size_t(res.max_context - o.max_new_tokens));
      it.kept = kept.size();
      it.prediction = greedy_answer(gen, tok, kept, o.max_new_tokens);
      if (!summary && blank(it.prediction)) it.prediction = "Unanswerable";
    }
    res.truncated += it.kept < it.prompt_tokens;
    it.scores = score_example(it.prediction, ex.outputs);
    scores.push_back(it.scores);
    res.items.push_back(std::move(it));
    if (o.progress) show_progress(d.task, i + 1, n);
  }
  res.scores = aggregate_scrolls(scores);
  return res;
}

}  // namespace tda
