// The CPU side of `tda bench attention` (bench_attention_cpu.cpp), and what the CUDA tile count
// (bench.cpp) takes from it.
#pragma once
#include <string>
#include <vector>

#include "backend/ops.h"

namespace tda {

// Random inputs (one layer per kind and T), or a checkpoint's q, k over --tokens-file.
int bench_attention_cpu(const std::vector<std::string>& kinds, const std::vector<int>& Ts, int reps,
                        int heads, const std::string& checkpoint, const std::string& tokens_file);

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
