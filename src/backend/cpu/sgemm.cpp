// cpu_sgemm: the CPU backend's one GEMM (cpu_ops.h), on OpenBLAS.
//
// One thread pool: every GEMM of the CPU backend is split by the OpenMP team that also runs
// the backend's other loops, each thread calling a one-thread OpenBLAS SGEMM on its slab of C.
// Left to itself, Debian's (pthread) OpenBLAS runs its own threads, which spin after each call
// while OpenMP's spin after each loop: on a machine with as many threads as cores the two pools
// take turns on the cores at every hand-off. Per GEMM shape the split is as fast as OpenBLAS's
// threads but for c_attn's forward (docs/perf.md, CPU; scripts/bench/gemm_split_ab.cpp). Each
// element of C is still one OpenBLAS kernel's sum over K, as in a whole-matrix call.
#include <cblas.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include "backend/cpu/cpu_ops.h"

extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename(void);

namespace tda {

void set_cpu_threads(int n) {
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

const char* blas_core_name() {
  const char* n = openblas_get_corename();
  return n ? n : "unknown";
}

// OpenBLAS as Debian builds it (DYNAMIC_ARCH) picks its kernels by the CPU's family and model
// when it loads. A model newer than the library falls back to a pre-AVX2 kernel set: 0.3.21
// (Debian 12) runs Prescott's SSE3 kernels on an Emerald Rapids Xeon (family 6, model 207) with
// AVX-512. The core whose kernels this CPU's instruction set runs, when OpenBLAS chose one
// without AVX2; nullptr when its choice stands.
const char* blas_core_upgrade() {
  static const char* const kPreAvx2[] = {
      "Prescott",   "Core2",       "Penryn",       "Dunnington", "Nehalem",   "Sandybridge",
      "Atom",       "Nano",        "Katmai",       "Coppermine", "Northwood", "Banias",
      "Athlon",     "Opteron",     "Opteron_SSE3", "Barcelona",  "Bobcat",    "Bulldozer",
      "Piledriver", "Steamroller", "Excavator",    "Unknown"};
  const char* chosen = blas_core_name();
  if (std::none_of(std::begin(kPreAvx2), std::end(kPreAvx2),
                   [&](const char* n) { return std::strcmp(n, chosen) == 0; }))
    return nullptr;
  // libgcc's test includes the OS's support for the registers (XCR0), not just CPUID's bits.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512cd"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

// Both settings are read when the libraries load, before main: set them, then run the binary
// again, once (the second run finds them set). Measured: d12 B=4 T=64 step 7.1 s -> 5.6 s with
// passive waits; two tiny training runs side by side on 2 cores (ctest -j2), 80 s -> 62 s. The
// BLAS core, on the Emerald Rapids machine above: 20 tiny softmax steps 32.0 s -> 7.7 s.
void reexec_with_cpu_runtime_env(char** argv) {
  bool changed = false;
  if (!std::getenv("OMP_WAIT_POLICY")) {
    ::setenv("OMP_WAIT_POLICY", "passive", 1);
    changed = true;
  }
  if (!std::getenv("OPENBLAS_CORETYPE")) {
    if (const char* core = blas_core_upgrade()) {
      ::setenv("OPENBLAS_CORETYPE", core, 1);
      changed = true;
    }
  }
  if (changed) ::execv("/proc/self/exe", argv);  // returns only on failure: then run as we are
}

void cpu_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
               int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  // Cheap (a store) and needed before every call: whoever called OpenBLAS last (a benchmark's
  // reference SGEMM, set_cpu_threads) may have set it to more.
  openblas_set_num_threads(1);
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  const int team = omp_get_max_threads();
  // Below ~2 MFLOP a parallel region costs more than it saves.
  if (team == 1 || 2.0 * M * N * K < 2e6) {
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  // Slabs of the longer side of C, in multiples of 16 (whole register tiles of the kernels).
  const bool by_cols = N >= M;
  const int len = by_cols ? N : M;
  const int slab = ((len + team - 1) / team + 15) / 16 * 16;
#pragma omp parallel num_threads(team)
  {
    const int lo = std::min(len, omp_get_thread_num() * slab), hi = std::min(len, lo + slab);
    if (hi > lo) {
      if (by_cols)  // columns lo..hi of op(B) and C
        cblas_sgemm(CblasRowMajor, ta, tb, M, hi - lo, K, alpha, A, lda,
                    trans_b ? B + size_t(lo) * ldb : B + lo, ldb, beta, C + lo, ldc);
      else  // rows lo..hi of op(A) and C
        cblas_sgemm(CblasRowMajor, ta, tb, hi - lo, N, K, alpha,
                    trans_a ? A + lo : A + size_t(lo) * lda, lda, B, ldb, beta,
                    C + size_t(lo) * ldc, ldc);
    }
  }
}

}  // namespace tda
