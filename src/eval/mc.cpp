#include "eval/mc.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <numeric>

#include "core/error.h"

namespace tda {

LoglikRequest encode_pair(const Gpt2Tokenizer& tok, const std::string& context,
                          const std::string& continuation) {
  LoglikRequest r;
  if (context.empty()) {  // lm-eval scores an unconditional continuation after EOT
    r.context = {tok.eot()};
    r.continuation = tok.encode(continuation);
    return r;
  }
  // Python's str.rstrip() whitespace (ASCII part): moved from the context to the continuation
  size_t k = context.size();
  while (k > 0 && std::string(" \t\n\r\v\f").find(context[k - 1]) != std::string::npos) --k;
  const std::string ctx = context.substr(0, k);
  const std::string cont = context.substr(k) + continuation;
  const std::vector<int32_t> whole = tok.encode(ctx + cont);
  r.context = tok.encode(ctx);
  const size_t n = std::min(r.context.size(), whole.size());
  r.continuation.assign(whole.begin() + long(n), whole.end());
  return r;
}

std::vector<double> score_loglik(GPT2& model, const std::vector<LoglikRequest>& reqs,
                                 int batch_tokens,
                                 const std::function<void(size_t, size_t)>& progress) {
  const int L = model.config().seq_len;
  struct Win {
    std::vector<int32_t> in, tg;
    int n_cont;
  };
  // Windows, then longest first (lm-eval's order too) so each batch pads little.
  std::vector<Win> w(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    const auto& r = reqs[i];
    TDA_CHECK(!r.continuation.empty(), "eval: empty continuation");
    std::vector<int32_t> full = r.context;
    full.insert(full.end(), r.continuation.begin(), r.continuation.end());
    const size_t keep = std::min(full.size(), size_t(L) + 1);
    std::vector<int32_t> win(full.end() - long(keep), full.end());
    w[i].in.assign(win.begin(), win.end() - 1);
    w[i].tg.assign(win.begin() + 1, win.end());
    w[i].n_cont = int(std::min(r.continuation.size(), w[i].tg.size()));
  }
  std::vector<size_t> order(reqs.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return w[a].in.size() > w[b].in.size(); });
  std::vector<double> out(reqs.size(), 0.0);
  std::vector<int32_t> in, tg;
  TDA_CHECK(batch_tokens >= 1, "eval: --batch-tokens must be >= 1");
  // T rounded up to 16 and B kept to a few values: fewer activation re-allocations
  const auto batch_at = [&](size_t done) {
    const int T_raw = int(w[order[done]].in.size());
    const int T = std::min(L, (T_raw + 15) / 16 * 16);
    return std::make_pair(std::max(1, std::min(int(order.size() - done), batch_tokens / T)), T);
  };
  // The largest batch of the plan, before the first one is allocated.
  MemoryNeed most;
  for (size_t done = 0; done < order.size();) {
    const auto [B, T] = batch_at(done);
    const MemoryNeed m = model.batch_memory(B, T);
    if (m.backend + m.host > most.backend + most.host) most = m;
    done += size_t(B);
  }
  require_memory(model.ops(), most, "eval: --batch-tokens " + std::to_string(batch_tokens));
  size_t done = 0;
  while (done < order.size()) {
    const auto [B, T] = batch_at(done);
    in.assign(size_t(B) * T, 0);
    tg.assign(size_t(B) * T, 0);
    for (int b = 0; b < B; ++b) {
      const Win& x = w[order[done + size_t(b)]];
      std::copy(x.in.begin(), x.in.end(), in.begin() + long(b) * T);
      std::copy(x.tg.begin(), x.tg.end(), tg.begin() + long(b) * T);
    }
    model.set_batch(B, T);
    model.forward(in.data(), tg.data(), false, 0.f);
    const float* loss = model.token_losses();
    for (int b = 0; b < B; ++b) {
      const size_t idx = order[done + size_t(b)];
      const Win& x = w[idx];
      const int len = int(x.in.size());
      double s = 0;
      for (int t = len - x.n_cont; t < len; ++t) s -= double(loss[size_t(b) * T + size_t(t)]);
      out[idx] = s;
    }
    done += size_t(B);
    if (progress) progress(done, order.size());
  }
  return out;
}

int argmax_first(const std::vector<double>& v, const std::vector<double>* norm) {
  int best = 0;
  for (size_t i = 1; i < v.size(); ++i) {
    const double a = v[i] / (norm ? (*norm)[i] : 1.0);
    const double b = v[size_t(best)] / (norm ? (*norm)[size_t(best)] : 1.0);
    if (a > b) best = int(i);
  }
  return best;
}

double completion_len(const std::string& c) {
  size_t b = (!c.empty() && c[0] == ' ') ? 1 : 0;
  double n = 0;
  for (size_t i = b; i < c.size(); ++i)
    if ((static_cast<unsigned char>(c[i]) & 0xC0) != 0x80) n += 1;  // UTF-8 lead bytes
  return std::max(n, 1.0);
}

namespace {

void mean_stderr(const std::vector<int>& x, double* mean, double* se) {
  const double n = double(x.size());
  double m = 0;
  for (int v : x) m += v;
  m = n > 0 ? m / n : 0;
  double ss = 0;
  for (int v : x) ss += (v - m) * (v - m);
  *mean = m;
  *se = n > 1 ? std::sqrt(ss / (n - 1)) / std::sqrt(n) : 0;
}

}  // namespace

McResult run_mc(GPT2& model, const Gpt2Tokenizer& tok, const McDataset& d, const McRunOptions& o) {
  McResult r;
  r.task = d.task;
  std::vector<LoglikRequest> reqs;
  std::vector<size_t> items;  // scored item indices
  const size_t n_items = o.limit > 0 ? std::min(d.items.size(), size_t(o.limit)) : d.items.size();
  const size_t L = size_t(model.config().seq_len);
  for (size_t i = 0; i < n_items; ++i) {
    if (d.items[i].excluded) {
      ++r.excluded;
      continue;
    }
    items.push_back(i);
    for (const auto& c : d.items[i].choices) {
      reqs.push_back(encode_pair(tok, c.context, c.continuation));
      if (reqs.back().context.size() + reqs.back().continuation.size() > L + 1) ++r.truncated;
    }
  }
  auto bar = [&](size_t done, size_t total) {
    if (!o.progress) return;
    const int w = 30, f = int(double(w) * double(done) / double(total));
    std::cerr << "\r[" << d.task << "] [" << std::string(size_t(f), '#')
              << std::string(size_t(w - f), ' ') << "] " << done << "/" << total << " requests"
              << (done == total ? "\n" : "") << std::flush;
  };
  const std::vector<double> ll = score_loglik(model, reqs, o.batch_tokens, bar);
  size_t k = 0;
  std::vector<int> hit, hit_norm;
  for (size_t i : items) {
    const McItem& it = d.items[i];
    std::vector<double> v(ll.begin() + long(k), ll.begin() + long(k + it.choices.size())), len;
    k += it.choices.size();
    for (const auto& c : it.choices) len.push_back(completion_len(c.continuation));
    r.logliks.push_back(v);
    r.pred.push_back(argmax_first(v));
    r.pred_norm.push_back(argmax_first(v, &len));
    r.gold.push_back(it.gold);
    hit.push_back(r.pred.back() == it.gold);
    hit_norm.push_back(r.pred_norm.back() == it.gold);
  }
  r.n = items.size();
  mean_stderr(hit, &r.acc, &r.acc_stderr);
  mean_stderr(hit_norm, &r.acc_norm, &r.acc_norm_stderr);
  return r;
}

}  // namespace tda
