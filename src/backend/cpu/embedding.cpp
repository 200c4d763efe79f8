// Token embedding: y[n] = wte[token[n]];  backward dwte[token[n]] += dy[n].
#include <cstring>

#include "backend/cpu/cpu_ops.h"

namespace tda {

void CpuOps::embedding_forward(float* y, const int32_t* tokens, const float* wte, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n)
    std::memcpy(y + size_t(n) * C, wte + size_t(tokens[n]) * C, sizeof(float) * size_t(C));
}

// Serial over rows so repeated tokens accumulate in a fixed order (deterministic); parallel
// over channels.
void CpuOps::embedding_backward(float* dwte, const float* dy, const int32_t* tokens,
                                const int32_t* /*plan: grouping rows by token is for devices*/,
                                int N, int C) {
#pragma omp parallel for schedule(static)
  for (int c = 0; c < C; ++c)
    for (int n = 0; n < N; ++n) dwte[size_t(tokens[n]) * C + c] += dy[size_t(n) * C + c];
}

}  // namespace tda
