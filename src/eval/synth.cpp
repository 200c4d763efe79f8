#include "eval/synth.h"

#include <algorithm>

#include "backend/ops.h"
#include "core/error.h"
#include "data/synthetic.h"
#include "eval/diagnostics.h"

namespace tda {

namespace {

// The trained model's config at another length (RoPE tables to T, NTK-scaled by ntk_factor).
ModelConfig at_length(ModelConfig m, int T, double ntk_factor) {
  m.seq_len = T;
  m.rope_ntk_factor = ntk_factor;
  return m;
}

// The trained weights, at the trained step: kinds that anneal (dex) run as at its end.
void take_weights(GPT2& model, const GPT2& trained) {
  model.params_from_host(trained.params_to_host().data());
  model.set_step(trained.step());
}

}  // namespace

SynthAccuracy synthetic_accuracy(const GPT2& trained, const Config& cfg, int T, double ntk_factor,
                                 int sequences, int batch_tokens) {
  const SyntheticTask task(cfg.data.synthetic);
  TDA_CHECK(T >= task.min_length(), "synth: length " + std::to_string(T) + " cannot hold task " +
                                        cfg.data.synthetic.task + " (it needs " +
                                        std::to_string(task.min_length()) + " tokens)");
  TDA_CHECK(sequences >= 1, "synth: sequences must be >= 1");
  const ModelConfig m = at_length(cfg.model, T, ntk_factor);
  GPT2 model(m, cfg.attention, trained.ops(), trained.dtype());
  take_weights(model, trained);

  SynthAccuracy r;
  r.length = T;
  r.ntk_factor = ntk_factor;
  const int V = m.vocab_size, B = std::max(1, std::min(sequences, batch_tokens / T));
  std::vector<int32_t> inputs(size_t(B) * T), targets(inputs.size());
  std::vector<float> logits;
  for (int first = 0; first < sequences; first += B) {
    const int b_n = std::min(B, sequences - first);
    for (int b = 0; b < b_n; ++b)
      task.generate(cfg.train.seed, SyntheticSplit::kTest, uint64_t(first + b), T,
                    inputs.data() + size_t(b) * T, targets.data() + size_t(b) * T);
    std::vector<int> rows;
    for (int n = 0; n < b_n * T; ++n)
      if (targets[size_t(n)] != kIgnoreTarget) rows.push_back(n);
    logits.resize(rows.size() * size_t(V));
    model.set_batch(b_n, T);
    model.logits_at(inputs.data(), rows, logits.data());
    std::vector<int> wrong(size_t(b_n), 0);
    for (size_t i = 0; i < rows.size(); ++i) {
      const float* l = logits.data() + i * size_t(V);
      const int guess = int(std::max_element(l, l + m.real_vocab_size) - l);
      const bool right = guess == targets[size_t(rows[i])];
      r.correct += right;
      wrong[size_t(rows[i] / T)] += !right;
    }
    r.answers += long(rows.size());
    r.sequences += b_n;
    r.all_correct += std::count(wrong.begin(), wrong.end(), 0);
  }
  return r;
}

json synthetic_diagnostics(const GPT2& trained, const Config& cfg, int T, double ntk_factor,
                           int sequences) {
  const SyntheticTask task(cfg.data.synthetic);
  TDA_CHECK(T >= task.min_length() && sequences >= 1,
            "synth: diagnostics need a length that holds the task and >= 1 sequence");
  ProbeOps probe(trained.ops());
  GPT2 model(at_length(cfg.model, T, ntk_factor), cfg.attention, probe, trained.dtype());
  take_weights(model, trained);
  std::vector<std::vector<int32_t>> seqs(static_cast<size_t>(sequences),
                                         std::vector<int32_t>(static_cast<size_t>(T)));
  std::vector<int32_t> targets(static_cast<size_t>(T));
  for (int i = 0; i < sequences; ++i)
    task.generate(cfg.train.seed, SyntheticSplit::kTest, uint64_t(i), T, seqs[size_t(i)].data(),
                  targets.data());
  const json d = run_diagnostics(model, probe, seqs, DiagOptions{});
  json r = {{"length", T}, {"ntk_factor", ntk_factor}, {"sequences", sequences}};
  r.update(d.at("means").at("effective"));
  return r;
}

}  // namespace tda
