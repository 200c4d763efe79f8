// Validation loss of a model over token shards: the mean next-token cross-entropy over the
// first `sequences` windows of T+1 tokens of the files (in file order, no shuffling), in
// batches of B windows, exactly as the trainer's periodic validation reads its data
// (DataLoader, shuffle off). The trainer's own `val` record at step s equals this over
// train.val_batches x train.micro_batch windows of the same data at the same step.
#pragma once
#include <string>

#include "model/gpt2.h"

namespace tda {

struct ValLossResult {
  double loss = 0;
  long sequences = 0;  // windows scored: a multiple of B
  long tokens = 0;     // sequences * T (predicted tokens)
  long available = 0;  // windows the data holds
};

// sequences <= 0: every whole batch the data holds. Throws when the data holds less than one
// batch, naming the pattern.
ValLossResult validation_loss(GPT2& model, const std::string& pattern, int B, long sequences);

}  // namespace tda
