// A/B of the CPU backend's GEMM split (src/backend/cpu/sgemm.cpp) against OpenBLAS's own threads
// on the GEMM shapes of a d12 step (B*T = N rows) and of the LM head (N-row chunks): each shape
// 7 times, both ways alternately, after an OpenMP loop each time (as in a training step, where
// OpenMP's team has just run when a GEMM starts). Prints the median GFLOP/s of each.
// Build and run (the team is OMP_NUM_THREADS; OpenBLAS gets as many threads), N = B*T rows:
//   g++ -O2 -fopenmp -std=c++17 -Isrc scripts/bench/gemm_split_ab.cpp
//       src/backend/cpu/sgemm.cpp -lopenblas -o /tmp/gemm_split_ab
//   OMP_NUM_THREADS=2 /tmp/gemm_split_ab 256
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend/cpu/cpu_ops.h"

extern "C" void openblas_set_num_threads(int);

namespace {
struct Shape {
  const char* name;
  bool ta, tb;
  int M, N, K;
};

double seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
  const int N = argc > 1 ? std::atoi(argv[1]) : 256, C = 768, V = 50304;
  const Shape shapes[] = {
      {"c_attn fwd", false, true, N, 3 * C, C},   {"c_fc fwd", false, true, N, 4 * C, C},
      {"mlp_proj fwd", false, true, N, C, 4 * C}, {"c_fc bwd dx", false, false, N, C, 4 * C},
      {"c_fc bwd dW", true, false, 4 * C, C, N},  {"lm_head logits", false, true, N, V, C},
      {"lm_head dx", false, false, N, C, V},      {"lm_head dW", true, false, V, C, N}};
  const int team = omp_get_max_threads();
  std::vector<float> touch(4096);
  for (const Shape& s : shapes) {
    const int lda = s.ta ? s.M : s.K, ldb = s.tb ? s.K : s.N;
    std::vector<float> a(size_t(s.M) * s.K, 0.01f), b(size_t(s.K) * s.N, 0.02f),
        c(size_t(s.M) * s.N);
    std::vector<double> blas, split;
    for (int rep = 0; rep < 7; ++rep) {
#pragma omp parallel for
      for (int i = 0; i < int(touch.size()); ++i) touch[i] += 1.f;
      openblas_set_num_threads(team);
      auto t0 = std::chrono::steady_clock::now();
      cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans,
                  s.M, s.N, s.K, 1.f, a.data(), lda, b.data(), ldb, 0.f, c.data(), s.N);
      blas.push_back(seconds(t0));
#pragma omp parallel for
      for (int i = 0; i < int(touch.size()); ++i) touch[i] += 1.f;
      t0 = std::chrono::steady_clock::now();
      tda::cpu_sgemm(s.ta, s.tb, s.M, s.N, s.K, 1.f, a.data(), lda, b.data(), ldb, 0.f, c.data(),
                     s.N);
      split.push_back(seconds(t0));
    }
    std::sort(blas.begin(), blas.end());
    std::sort(split.begin(), split.end());
    const double gflop = 2e-9 * s.M * s.N * s.K;
    std::printf("%-15s %6dx%6dx%6d  openblas threads %6.1f GFLOP/s  omp split %6.1f GFLOP/s\n",
                s.name, s.M, s.N, s.K, gflop / blas[3], gflop / split[3]);
  }
  return 0;
}
