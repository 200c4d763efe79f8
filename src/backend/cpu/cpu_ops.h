// fp32 CPU backend: OpenBLAS for matmuls, OpenMP loops for everything else. Each op's forward
// and backward live side by side in one file named after the op.
#pragma once
#include "backend/ops.h"

namespace tda {

// Entmax needs whole rows (its threshold is a root over the row): attention_entmax.cpp.
void cpu_entmax_forward(const AttnArgs& a);
void cpu_entmax_backward(const AttnArgs& a, bool drop_term);
// The host threads of the backends (OpenMP's team, and OpenBLAS's for calls outside cpu_sgemm):
// make_ops() sets them from train.threads (sgemm.cpp).
void set_cpu_threads(int n);
// Two settings the libraries read when they load, before main, so a main() calls this first: it
// sets them and re-executes the binary once. OMP_WAIT_POLICY=passive: OpenMP's default
// spin-waiting after each parallel region steals the cores from OpenBLAS's threads between
// GEMMs, and from a second process on the same cores. OPENBLAS_CORETYPE, only where OpenBLAS
// does not know the CPU and fell back to pre-AVX2 kernels: the AVX2 or AVX-512 kernels the CPU
// runs. A user's own value of either is left alone (sgemm.cpp).
void reexec_with_cpu_runtime_env(char** argv);
// The OpenBLAS core reexec_with_cpu_runtime_env sets, or nullptr where OpenBLAS's choice stands.
const char* blas_core_upgrade();
// The kernel set OpenBLAS runs ("SkylakeX", "Haswell", ...): tda bench train prints it.
const char* blas_core_name();
// Row-major C(M,N) = alpha op(A) op(B) + beta C with cblas_sgemm's arguments, split over the
// OpenMP team, one single-threaded OpenBLAS call per thread (sgemm.cpp says why).
void cpu_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
               int lda, const float* B, int ldb, float beta, float* C, int ldc);
// The scalar streaming kernels (attention_scalar.cpp): one (i, j) at a time, as the backend was
// before its kernels were vectorised. The reference the tests hold CpuOps::attention_* to.
void cpu_attention_forward_reference(const AttnArgs& a);
void cpu_attention_backward_reference(const AttnArgs& a, bool drop_term = false);
// CpuOps::attention_backward, with the negative control the gradient tests must catch:
// drop_term drops one term of the backward (normalised kinds: the row constant D_i / c_i;
// rectifiers: the factor p of p r^(p-1)). Tests only; CpuOps passes false.
void cpu_attention_backward(const AttnArgs& a, bool drop_term);

class CpuOps final : public Ops {
 public:
  const char* name() const override { return "cpu"; }
#define TDA_OP(ret, fn, params, args) ret fn params override;
#define TDA_OP_COMPOSED(ret, fn, params, args)
#include "backend/ops.def"
  // Fused into one pass over the tensor (optimizer.cpp).
  void adamw_clip_zero(float* p, float* g, float* m, float* v, size_t n, float lr, float beta1,
                       float beta2, float eps, float wd, int t, float grad_scale) override;
};

}  // namespace tda
