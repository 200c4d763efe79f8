// fp32 CPU backend: OpenBLAS for matmuls, OpenMP loops for everything else. Each op's forward
// and backward live side by side in one file named after the op.
#pragma once
#include "backend/ops.h"

namespace tda {

// Entmax needs whole rows (its threshold is a root over the row): attention_entmax.cpp.
void cpu_entmax_forward(const AttnArgs& a);
void cpu_entmax_backward(const AttnArgs& a);
// Row-major C(M,N) = alpha op(A) op(B) + beta C with cblas_sgemm's arguments, split over the
// OpenMP team, one single-threaded OpenBLAS call per thread (sgemm.cpp says why).
void cpu_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
               int lda, const float* B, int ldb, float beta, float* C, int ldc);
// The scalar streaming kernels (attention_scalar.cpp): one (i, j) at a time, as the backend was
// before its kernels were vectorised. The reference the tests hold CpuOps::attention_* to.
void cpu_attention_forward_reference(const AttnArgs& a);
void cpu_attention_backward_reference(const AttnArgs& a);

class CpuOps final : public Ops {
 public:
  const char* name() const override { return "cpu"; }
  void matmul_forward(float* y, const float* x, const float* W, int N, int C, int OC) override;
  void matmul_backward(float* dx, float* dW, const float* dy, const float* x, const float* W, int N,
                       int C, int OC, bool accumulate_dx) override;
  void rmsnorm_forward(float* y, float* rstd, const float* x, const float* w, int N, int C,
                       float eps) override;
  void rmsnorm_backward(float* dx, float* dw, const float* dy, const float* x, const float* w,
                        const float* rstd, int N, int C) override;
  void gelu_forward(float* y, const float* x, size_t n) override;
  void gelu_backward(float* dx, const float* x, const float* dy, size_t n) override;
  void add(float* y, const float* a, const float* b, size_t n) override;
  void add_inplace(float* y, const float* a, size_t n) override;
  void embedding_forward(float* y, const int32_t* tokens, const float* wte, int N, int C) override;
  void embedding_backward(float* dwte, const float* dy, const int32_t* tokens, const int32_t* plan,
                          int N, int C) override;
  void rope_forward(float* out, const float* x, int row, int col0, const float* cos,
                    const float* sin, int B, int T, int H, int D, int pos0) override;
  void rope_backward(float* dx, const float* dout, int row, int col0, const float* cos,
                     const float* sin, int B, int T, int H, int D, int pos0) override;
  void split_heads(float* out, const float* x, int row, int col0, int B, int T, int H,
                   int D) override;
  void merge_heads(float* x, const float* in, int row, int col0, int B, int T, int H,
                   int D) override;
  void lm_head_loss(float* losses, float* dx, float* dW, const float* x, const float* W,
                    const int32_t* targets, int N, int C, int V_padded, int V_real,
                    float grad_scale) override;
  void lm_head_logits(float* logits, const float* x, const float* W, int C, int V) override;
  void attention_forward(const AttnArgs& a) override;
  void attention_backward(const AttnArgs& a) override;
  double sum_squares(const float* x, size_t n) override;
  void scale(float* x, size_t n, float s) override;
  void adamw(float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1,
             float beta2, float eps, float wd, int t) override;
  void adamw_clip_zero(float* p, float* g, float* m, float* v, size_t n, float lr, float beta1,
                       float beta2, float eps, float wd, int t, float grad_scale) override;
  void zero(float* x, size_t n) override;
  void l2norm_forward(float* x, float* norm, size_t N, int D) override;
  void l2norm_backward(float* dx, const float* xhat, const float* norm, size_t N, int D) override;
  void row_dot(float* out, const float* a, const float* b, size_t N, int D) override;
  void head_row_sum(float* dst, const float* x, const float* w, float scale, int B, int H,
                    int T) override;
  void threshold_tau(float* out, const float* beta, float beta_fixed, bool derivative, int T,
                     double kappa, int d) override;
  void scale_rows(float* y, const float* x, const float* f, int f_head_stride, int B, int H, int T,
                  int D) override;
  void sigmoid_gate_forward(float* y, const float* z, int z_stride, int N, int C,
                            int group) override;
  void sigmoid_gate_backward(float* g, float* dz, int dz_stride, const float* dy, const float* o,
                             const float* z, int z_stride, int N, int C, int group) override;
  void axpby(float* y, float a, const float* x, float b, size_t n,
             const float* s = nullptr) override;
  void clamp_affine(float* out, const float* x, float a, float b, float lo, float hi) override;
  void diff_lambda(float* out, const float* lq1, const float* lk1, const float* lq2,
                   const float* lk2, int d, float init) override;
  void diff_lambda_backward(float* dlq1, float* dlk1, float* dlq2, float* dlk2, const float* lq1,
                            const float* lk1, const float* lq2, const float* lk2, const float* e,
                            const float* dl_sum, int d) override;
  void position_scales(float* f, const float* s, const float* b, float div, int H, int T) override;
  void rela_norm_forward(float* y, float* r, float* mu, const float* u, const float* gamma,
                         const float* w, int N, int C, float eps, bool center) override;
  void rela_norm_backward(float* du, float* dgamma, float* dw, const float* dy, const float* u,
                          const float* r, const float* mu, const float* gamma, const float* w,
                          int N, int C, bool center) override;
};

}  // namespace tda
