// Zero-shot multiple choice during training (train.eval_every, docs/evaluation.md): the first
// train.eval_items items of train.eval_task, split over the training ranks, each rank scoring
// its share with the evaluator of `tda eval mc` (eval/mc.h), the counts summed over the ranks
// as validation sums its losses. So a record at step s equals `tda eval mc --limit N` on the
// checkpoint of step s.
#pragma once
#include <string>

#include "core/config.h"
#include "data/tokenizer.h"
#include "distributed/communicator.h"
#include "eval/mc_data.h"
#include "model/gpt2.h"

namespace tda {

struct LoopEvalResult {
  std::string task;
  double acc = 0, acc_norm = 0;
  long items = 0;  // scored, over every rank
};

// The items of the first `limit` (0: all) of d that rank `rank` of `world` scores: every
// world-th, from its rank on. Excluded items stay in (run_mc counts them out), so the ranks'
// shares add up to `tda eval mc --limit`.
McDataset rank_share(const McDataset& d, int limit, int rank, int world);

class LoopEval {
 public:
  // Reads train.eval_task's file and the GPT-2 tokenizer now, so that a missing or bad file
  // stops the run at start-up with one line naming it (not at the first evaluation, hours in).
  LoopEval(const TrainConfig& t, int rank, int world);
  // Scores this rank's items (batches of at most batch_tokens) and sums over the ranks: every
  // rank must call it.
  LoopEvalResult run(GPT2& model, Communicator& comm, int batch_tokens) const;

 private:
  McDataset mine_;
  Gpt2Tokenizer tok_;
};

}  // namespace tda
