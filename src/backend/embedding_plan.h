// The embedding backward's plan: the N rows of a micro-batch grouped by token (a stable counting
// sort), so that a device backend sums each token's rows in increasing n without atomics and
// without reading the tokens back. The model builds it on the host from the tokens the loader
// already has and uploads it with them (one upload per micro-step: docs/perf.md, host syncs).
//   plan = [S | order (N) | seg_token (N, S used) | seg_start (N + 1, S + 1 used)]
// S distinct tokens; segment s is token seg_token[s], rows order[seg_start[s] .. seg_start[s+1]).
// The size depends on N only, so the buffer and the kernel's grid do not depend on the data.
#pragma once
#include <cstddef>
#include <cstdint>

namespace tda {

inline size_t embedding_plan_size(int N) {
  return 3 * size_t(N) + 2;
}

// Writes embedding_plan_size(N) int32 values to plan (host memory). tokens[n] >= 0.
void embedding_plan(const int32_t* tokens, int N, int32_t* plan);

}  // namespace tda
