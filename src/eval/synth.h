// Exact-match accuracy of a trained model on a synthetic retrieval task (data/synthetic.h) at any
// length: the model is rebuilt at that length (RoPE tables, optionally NTK-scaled) on the trained
// weights, and its greedy answer (argmax over the real vocabulary) at every answer position of
// fresh test sequences is compared with the task's answer. tda synth runs it per kind and length.
#pragma once
#include "core/config.h"
#include "model/gpt2.h"

namespace tda {

struct SynthAccuracy {
  int length = 0;
  double ntk_factor = 1.0;  // model.rope_ntk_factor the model ran with
  long sequences = 0, answers = 0;
  long correct = 0;      // answers whose argmax is the task's answer
  long all_correct = 0;  // sequences with every answer right
  double accuracy() const { return answers ? double(correct) / double(answers) : 0.0; }
  double sequence_accuracy() const { return sequences ? double(all_correct) / sequences : 0.0; }
};

// `sequences` test sequences (SyntheticSplit::kTest under cfg.train.seed) of T tokens of the
// task cfg.data.synthetic, batched to about `batch_tokens` tokens per forward, on the backend and
// at the optimizer step of `trained`, whose weights are used (cfg is the config it was trained
// with). ntk_factor replaces model.rope_ntk_factor (1: the trained RoPE).
SynthAccuracy synthetic_accuracy(const GPT2& trained, const Config& cfg, int T, double ntk_factor,
                                 int sequences, int batch_tokens = 8192);

// The attention diagnostics (eval/diagnostics.h: sparsity, gSinkRatio, survivors per row,
// dispersion, dead rows; the effective map's means over layers, heads and sequences) of `trained`
// on the first `sequences` test sequences of T tokens, as synthetic_accuracy reads them:
// {length, ntk_factor, sequences, <the effective map's stats_json>}.
nlohmann::json synthetic_diagnostics(const GPT2& trained, const Config& cfg, int T,
                                     double ntk_factor, int sequences);

}  // namespace tda
