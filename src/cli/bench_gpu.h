// The GPU side of tda bench (bench_gpu.cpp): CUDA-event timing of the attention kinds.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/ops.h"

namespace tda {

class Ops;

struct GpuAttnBench {
  int tokens = 16384;  // B = max(1, tokens / T) sequences per T
  int heads = 16;      // of dimension 64
  int reps = 5;        // timed repetitions (the median is reported)
  int warmup = 2;      // untimed repetitions first
  // attention.impl of the timed calls: "own" (our kernels), "cudnn" or "auto" (Ops::
  // set_attention_impl); a kind cuDNN cannot run is an error under "cudnn".
  std::string impl = "own";
  // Our forward's block shapes of the timed calls (attention.fwd_block_rows, fwd_block_keys), one
  // line each ({0, 0}: the default shape; else both set); a kind whose calls cannot take a shape
  // (attn_forward_shape) says so in fwd_shape_ran, or, when the list has more than one shape,
  // gets no line for it.
  std::vector<AttnFwdShape> fwd_shapes = {{0, 0}};
  // attention.deterministic of the timed calls, one line each: true, our backward's two kernels
  // (dq; dk/dv); false, FlashAttention-2's single kernel with dq by atomics (AttnArgs::atomic_dq)
  // where attn_backward_atomic serves the kind's calls (bwd_atomic_ran says whether it did).
  // With both values and several forward shapes, false is timed at the first shape only.
  std::vector<bool> deterministic = {true};
  // attention.bwd_stages of the timed calls, one line each (0: the default, 1); a kind whose calls
  // cannot take 2 (attn_backward_stages) says so in bwd_stages_ran, or, when the list has more
  // than one value, gets no line for it. With several forward shapes, a value other than the
  // first is timed at the first shape only.
  std::vector<int> bwd_stages = {0};
  bool print = true;  // each line to stdout
};

// One JSON line per (kind, T, shape): layer and kernel forward/backward medians (bench_gpu.cpp),
// printed and, given `records`, appended there. `backend`: the CUDA backend (make_ops("cuda")).
// Our kernels run the asked shapes: no tuning table (attention.tuning none).
int bench_attention_gpu(Ops& backend, const std::vector<std::string>& kinds,
                        const std::vector<int>& Ts, const GpuAttnBench& o,
                        std::vector<nlohmann::json>* records = nullptr);

// Median of v (0 when empty).
double median(std::vector<double> v);

}  // namespace tda
