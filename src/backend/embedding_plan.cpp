// The embedding backward's plan (embedding_plan.h): a stable counting sort of the rows by token.
#include "backend/embedding_plan.h"

#include <algorithm>
#include <vector>

namespace tda {

void embedding_plan(const int32_t* tokens, int N, int32_t* plan) {
  std::fill(plan, plan + embedding_plan_size(N), 0);
  if (N == 0) return;
  int32_t* order = plan + 1;
  int32_t* seg_token = order + N;
  int32_t* seg_start = seg_token + N;
  const int32_t V = *std::max_element(tokens, tokens + N) + 1;
  std::vector<int32_t> first(size_t(V) + 1, 0);  // first[v]: where token v's rows start
  for (int n = 0; n < N; ++n) ++first[size_t(tokens[n]) + 1];
  for (int32_t v = 0; v < V; ++v) first[size_t(v) + 1] += first[size_t(v)];
  std::vector<int32_t> next(first.begin(), first.end() - 1);
  for (int32_t n = 0; n < N; ++n) order[next[size_t(tokens[n])]++] = n;
  int32_t S = 0;
  for (int32_t v = 0; v < V; ++v)
    if (first[size_t(v) + 1] > first[size_t(v)]) {
      seg_token[S] = v;
      seg_start[S++] = first[size_t(v)];
    }
  seg_start[S] = N;
  plan[0] = S;
}

}  // namespace tda
