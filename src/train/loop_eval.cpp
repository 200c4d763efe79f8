#include "train/loop_eval.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "eval/mc.h"

namespace tda {

namespace {

McDataset load_task(const TrainConfig& t) {
  const std::vector<std::string>& tasks = mc_tasks();
  if (std::find(tasks.begin(), tasks.end(), t.eval_task) == tasks.end()) {
    std::string names;
    for (const auto& n : tasks) names += (names.empty() ? "" : ", ") + n;
    throw Error("config key 'train.eval_task' must be one of " + names + ", got \"" + t.eval_task +
                "\"");
  }
  McLoadOptions o;
  o.task = t.eval_task;
  o.data = t.eval_data;
  try {
    return load_mc(o);
  } catch (const Error& e) {
    // load_mc names the file and what to pass to `tda eval mc`; here the key is what to change.
    throw Error(std::string(e.what()) + " (train.eval_every " + std::to_string(t.eval_every) +
                ": set train.eval_data, or train.eval_every=0)");
  }
}

}  // namespace

McDataset rank_share(const McDataset& d, int limit, int rank, int world) {
  McDataset s;
  s.task = d.task;
  s.path = d.path;
  s.format = d.format;
  const size_t n = limit > 0 ? std::min(d.items.size(), size_t(limit)) : d.items.size();
  for (size_t i = size_t(rank); i < n; i += size_t(world)) s.items.push_back(d.items[i]);
  return s;
}

LoopEval::LoopEval(const TrainConfig& t, int rank, int world)
    : mine_(rank_share(load_task(t), t.eval_items, rank, world)),
      tok_(Gpt2Tokenizer::load(Gpt2Tokenizer::default_dir())) {}

LoopEvalResult LoopEval::run(GPT2& model, Communicator& comm, int batch_tokens) const {
  McRunOptions o;
  o.batch_tokens = batch_tokens;
  o.progress = false;
  McResult r;
  if (!mine_.items.empty()) r = run_mc(model, tok_, mine_, o);
  double hits = 0, hits_norm = 0;
  for (size_t i = 0; i < r.n; ++i) {
    hits += r.pred[i] == r.gold[i];
    hits_norm += r.pred_norm[i] == r.gold[i];
  }
  LoopEvalResult out;
  out.task = mine_.task;
  out.items = std::lround(comm.all_reduce_sum(double(r.n)));
  hits = comm.all_reduce_sum(hits);
  hits_norm = comm.all_reduce_sum(hits_norm);
  if (out.items > 0) {
    out.acc = hits / double(out.items);
    out.acc_norm = hits_norm / double(out.items);
  }
  return out;
}

}  // namespace tda
