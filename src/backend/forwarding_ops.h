// ForwardingOps: an Ops decorator base that forwards every method (memory included) to an
// inner backend. Decorators (diagnostics' ProbeOps, test recorders) override only what they
// observe or change.
#pragma once
#include "backend/ops.h"

namespace tda {

class ForwardingOps : public Ops {
 public:
  explicit ForwardingOps(Ops& inner) : in_(inner) {}
  const char* name() const override { return in_.name(); }
  void matmul_forward(float* y, const float* x, const float* W, int N, int C, int OC) override {
    in_.matmul_forward(y, x, W, N, C, OC);
  }
  void matmul_backward(float* dx, float* dW, const float* dy, const float* x, const float* W, int N,
                       int C, int OC, bool acc) override {
    in_.matmul_backward(dx, dW, dy, x, W, N, C, OC, acc);
  }
  void matmul_gelu_forward(float* y, float* pre, const float* x, const float* W, int N, int C,
                           int OC) override {
    in_.matmul_gelu_forward(y, pre, x, W, N, C, OC);
  }
  void matmul_backward_dgelu(float* dpre, float* dW, const float* dy, const float* x,
                             const float* W, const float* pre, int N, int C, int OC) override {
    in_.matmul_backward_dgelu(dpre, dW, dy, x, W, pre, N, C, OC);
  }
  void rmsnorm_forward(float* y, float* rstd, const float* x, const float* w, int N, int C,
                       float eps) override {
    in_.rmsnorm_forward(y, rstd, x, w, N, C, eps);
  }
  void rmsnorm_backward(float* dx, float* dw, const float* dy, const float* x, const float* w,
                        const float* rstd, int N, int C) override {
    in_.rmsnorm_backward(dx, dw, dy, x, w, rstd, N, C);
  }
  void gelu_forward(float* y, const float* x, size_t n) override { in_.gelu_forward(y, x, n); }
  void gelu_backward(float* dx, const float* x, const float* dy, size_t n) override {
    in_.gelu_backward(dx, x, dy, n);
  }
  void add(float* y, const float* a, const float* b, size_t n) override { in_.add(y, a, b, n); }
  void add_inplace(float* y, const float* a, size_t n) override { in_.add_inplace(y, a, n); }
  void embedding_forward(float* y, const int32_t* t, const float* wte, int N, int C) override {
    in_.embedding_forward(y, t, wte, N, C);
  }
  void embedding_backward(float* dwte, const float* dy, const int32_t* t, const int32_t* plan,
                          int N, int C) override {
    in_.embedding_backward(dwte, dy, t, plan, N, C);
  }
  void rope_forward(float* out, const float* x, int row, int col0, const float* cos,
                    const float* sin, int B, int T, int H, int D, int pos0) override {
    in_.rope_forward(out, x, row, col0, cos, sin, B, T, H, D, pos0);
  }
  void rope_backward(float* dx, const float* dout, int row, int col0, const float* cos,
                     const float* sin, int B, int T, int H, int D, int pos0) override {
    in_.rope_backward(dx, dout, row, col0, cos, sin, B, T, H, D, pos0);
  }
  void split_heads(float* out, const float* x, int row, int col0, int B, int T, int H,
                   int D) override {
    in_.split_heads(out, x, row, col0, B, T, H, D);
  }
  void merge_heads(float* x, const float* in, int row, int col0, int B, int T, int H,
                   int D) override {
    in_.merge_heads(x, in, row, col0, B, T, H, D);
  }
  void lm_head_loss(float* losses, float* dx, float* dW, const float* x, const float* W,
                    const int32_t* targets, int N, int C, int Vp, int Vr, float gs) override {
    in_.lm_head_loss(losses, dx, dW, x, W, targets, N, C, Vp, Vr, gs);
  }
  void lm_head_logits(float* logits, const float* x, const float* W, int C, int V) override {
    in_.lm_head_logits(logits, x, W, C, V);
  }
  void attention_forward(const AttnArgs& a) override { in_.attention_forward(a); }
  void attention_backward(const AttnArgs& a) override { in_.attention_backward(a); }
  double sum_squares(const float* x, size_t n) override { return in_.sum_squares(x, n); }
  void scale(float* x, size_t n, float s) override { in_.scale(x, n, s); }
  void adamw(float* p, const float* g, float* m, float* v, size_t n, float lr, float b1, float b2,
             float eps, float wd, int t) override {
    in_.adamw(p, g, m, v, n, lr, b1, b2, eps, wd, t);
  }
  void adamw_clip_zero(float* p, float* g, float* m, float* v, size_t n, float lr, float b1,
                       float b2, float eps, float wd, int t, float grad_scale) override {
    in_.adamw_clip_zero(p, g, m, v, n, lr, b1, b2, eps, wd, t, grad_scale);
  }
  bool host_memory() const override { return in_.host_memory(); }
  void* alloc_bytes(size_t bytes, const std::string& what) override {
    return in_.alloc_bytes(bytes, what);
  }
  void free_bytes(void* p) override { in_.free_bytes(p); }
  void upload(void* d, const void* s, size_t b) override { in_.upload(d, s, b); }
  void download(void* d, const void* s, size_t b) override { in_.download(d, s, b); }
  void copy(void* d, const void* s, size_t b) override { in_.copy(d, s, b); }
  void zero(float* x, size_t n) override { in_.zero(x, n); }
  void l2norm_forward(float* x, float* norm, size_t N, int D) override {
    in_.l2norm_forward(x, norm, N, D);
  }
  void l2norm_backward(float* dx, const float* xhat, const float* norm, size_t N, int D) override {
    in_.l2norm_backward(dx, xhat, norm, N, D);
  }
  void row_dot(float* out, const float* a, const float* b, size_t N, int D) override {
    in_.row_dot(out, a, b, N, D);
  }
  void head_row_sum(float* dst, const float* x, const float* w, float scale, int B, int H,
                    int T) override {
    in_.head_row_sum(dst, x, w, scale, B, H, T);
  }
  void threshold_tau(float* out, const float* beta, float beta_fixed, bool derivative, int T,
                     double kappa, int d) override {
    in_.threshold_tau(out, beta, beta_fixed, derivative, T, kappa, d);
  }
  void scale_rows(float* y, const float* x, const float* f, int fs, int B, int H, int T,
                  int D) override {
    in_.scale_rows(y, x, f, fs, B, H, T, D);
  }
  void sigmoid_gate_forward(float* y, const float* z, int zs, int N, int C, int group) override {
    in_.sigmoid_gate_forward(y, z, zs, N, C, group);
  }
  void sigmoid_gate_backward(float* g, float* dz, int dzs, const float* dy, const float* o,
                             const float* z, int zs, int N, int C, int group) override {
    in_.sigmoid_gate_backward(g, dz, dzs, dy, o, z, zs, N, C, group);
  }
  void axpby(float* y, float a, const float* x, float b, size_t n,
             const float* s = nullptr) override {
    in_.axpby(y, a, x, b, n, s);
  }
  void clamp_affine(float* out, const float* x, float a, float b, float lo, float hi) override {
    in_.clamp_affine(out, x, a, b, lo, hi);
  }
  void diff_lambda(float* out, const float* lq1, const float* lk1, const float* lq2,
                   const float* lk2, int d, float init) override {
    in_.diff_lambda(out, lq1, lk1, lq2, lk2, d, init);
  }
  void diff_lambda_backward(float* dlq1, float* dlk1, float* dlq2, float* dlk2, const float* lq1,
                            const float* lk1, const float* lq2, const float* lk2, const float* e,
                            const float* dl_sum, int d) override {
    in_.diff_lambda_backward(dlq1, dlk1, dlq2, dlk2, lq1, lk1, lq2, lk2, e, dl_sum, d);
  }
  void position_scales(float* f, const float* s, const float* b, float div, int H, int T) override {
    in_.position_scales(f, s, b, div, H, T);
  }
  void rela_norm_forward(float* y, float* r, float* mu, const float* u, const float* gamma,
                         const float* w, int N, int C, float eps, bool center) override {
    in_.rela_norm_forward(y, r, mu, u, gamma, w, N, C, eps, center);
  }
  void rela_norm_backward(float* du, float* dgamma, float* dw, const float* dy, const float* u,
                          const float* r, const float* mu, const float* gamma, const float* w,
                          int N, int C, bool center) override {
    in_.rela_norm_backward(du, dgamma, dw, dy, u, r, mu, gamma, w, N, C, center);
  }
  Bf16Matmuls* bf16_matmuls() override { return in_.bf16_matmuls(); }

 protected:
  Ops& in_;
};

}  // namespace tda
