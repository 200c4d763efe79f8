#include "eval/val_loss.h"

#include <algorithm>
#include <vector>

#include "data/loader.h"

namespace tda {

ValLossResult validation_loss(GPT2& model, const std::string& pattern, int B, long sequences) {
  const ModelConfig& m = model.config();
  const int T = m.seq_len;
  DataLoader loader(pattern, B, T, m.real_vocab_size, /*shuffle=*/false, /*seed=*/0);
  ValLossResult r;
  r.available = long(loader.samples_per_epoch());
  const long want = sequences > 0 ? std::min(sequences, r.available) : r.available;
  const long batches = std::max(1L, want / B);  // the loader checked that one batch fits
  model.set_batch(B, T);
  std::vector<int32_t> inputs(size_t(B) * T), targets(inputs.size());
  double sum = 0;
  for (long b = 0; b < batches; ++b) {
    loader.next(inputs.data(), targets.data());
    sum += model.forward(inputs.data(), targets.data(), false, 0.f);
  }
  r.loss = sum / double(batches);
  r.sequences = batches * B;
  r.tokens = r.sequences * T;
  return r;
}

}  // namespace tda
