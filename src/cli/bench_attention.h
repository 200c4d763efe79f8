// The CPU side of `tda bench attention` (bench_attention_cpu.cpp), and what the CUDA tile count
// (bench.cpp) takes from it.
#pragma once
#include <string>
#include <vector>

#include "backend/ops.h"

namespace tda {

// Random inputs: one layer per kind and T.
int bench_attention_cpu(const std::vector<std::string>& kinds, const std::vector<int>& Ts, int reps,
                        int heads);

// A trained checkpoint's q, k, v over real tokens (bench_attention_checkpoint.cpp), on any
// backend: one JSON line per T.
struct CheckpointAttnBench {
  std::string dir, tokens_file;
  int layer = -1;  // the layer whose kernel calls are timed; -1: every layer (summed)
  // 0: one window of T tokens. Otherwise the (b, h) slices of the random problem (B = max(1,
  // tokens / T) sequences of `heads` heads) made of windows: B x max(1, heads / the model's)
  // windows of T tokens at once (B of the kernel calls).
  int tokens = 0, heads = 0;
  int reps = 1, warmup = 0;
};
int bench_checkpoint_attention(Ops& backend, const std::vector<int>& Ts,
                               const CheckpointAttnBench& o);

// The kernel call a kind's own forward makes on one random sequence of T (its pre-ops: RoPE, L2
// norms, thresholds, lambda), as host copies of its (b, h) = (0, 0) slice. `args` keeps the
// call's sizes and settings; its pointers are not valid after the call.
struct AttnCall {
  AttnArgs args;
  std::vector<float> q, k, v, q2, k2, tau;
  float lambda = 0.f;
};
AttnCall capture_attention_call(const std::string& kind, int T);

}  // namespace tda
