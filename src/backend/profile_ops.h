// ProfileOps: an Ops decorator that times every call on the host clock, by phase (named by the
// caller: the trainer says "forward", "backward", "optimizer", ...) and by op (its name, plus
// the shape for matmuls and the LM head), for `tda bench train --profile`. On the CPU backend an
// op's return is its end, so the times are the ops' times; on a device backend they are launch
// times (the CUDA backend has its own event timing). Each phase's wall time is kept as well:
// what it spent outside every op (data loading, host loops, thread wake-ups between ops) is the
// difference.
#pragma once
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/forwarding_ops.h"

namespace tda {

class ProfileOps final : public ForwardingOps {
 public:
  explicit ProfileOps(Ops& inner) : ForwardingOps(inner) {}

  // Everything timed from here on belongs to `phase` (until the next call); "" stops the
  // phase clock (time between steps is nobody's).
  void set_phase(const std::string& phase);
  void reset();  // forget what was timed (after a warm-up step)
  // Label matmuls of this (in, out) width with a layer name ("c_attn") beside their shape.
  void name_matmul(int C, int OC, const std::string& name) { matmul_names_[{C, OC}] = name; }

  struct OpTime {
    std::string phase, op;
    long calls = 0;
    double ms = 0;
  };
  // In first-seen order.
  std::vector<OpTime> ops() const { return ops_; }
  // Wall time of each phase, in first-seen order.
  std::vector<std::pair<std::string, double>> phases() const;

  void matmul_forward(float* y, const float* x, const float* W, int N, int C, int OC) override;
  void matmul_backward(float* dx, float* dW, const float* dy, const float* x, const float* W, int N,
                       int C, int OC, bool acc) override;
  void matmul_gelu_forward(float* y, float* pre, const float* x, const float* W, int N, int C,
                           int OC) override;
  void matmul_backward_dgelu(float* dpre, float* dW, const float* dy, const float* x,
                             const float* W, const float* pre, int N, int C, int OC) override;
  void rmsnorm_forward(float* y, float* rstd, const float* x, const float* w, int N, int C,
                       float eps) override;
  void rmsnorm_backward(float* dx, float* dw, const float* dy, const float* x, const float* w,
                        const float* rstd, int N, int C) override;
  void gelu_forward(float* y, const float* x, size_t n) override;
  void gelu_backward(float* dx, const float* x, const float* dy, size_t n) override;
  void add(float* y, const float* a, const float* b, size_t n) override;
  void add_inplace(float* y, const float* a, size_t n) override;
  void embedding_forward(float* y, const int32_t* t, const float* wte, int N, int C) override;
  void embedding_backward(float* dwte, const float* dy, const int32_t* t, const int32_t* plan,
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
                    const int32_t* targets, int N, int C, int Vp, int Vr, float gs) override;
  void attention_forward(const AttnArgs& a) override;
  void attention_backward(const AttnArgs& a) override;
  double sum_squares(const float* x, size_t n) override;
  void scale(float* x, size_t n, float s) override;
  void adamw(float* p, const float* g, float* m, float* v, size_t n, float lr, float b1, float b2,
             float eps, float wd, int t) override;
  void adamw_clip_zero(float* p, float* g, float* m, float* v, size_t n, float lr, float b1,
                       float b2, float eps, float wd, int t, float grad_scale) override;
  void zero(float* x, size_t n) override;
  void l2norm_forward(float* x, float* norm, size_t N, int D) override;
  void l2norm_backward(float* dx, const float* xhat, const float* norm, size_t N, int D) override;
  void row_dot(float* out, const float* a, const float* b, size_t N, int D) override;
  void head_row_sum(float* dst, const float* x, const float* w, float scale, int B, int H,
                    int T) override;
  void threshold_tau(float* out, const float* beta, float beta_fixed, bool derivative, int T,
                     double kappa, int d) override;
  void scale_rows(float* y, const float* x, const float* f, int fs, int B, int H, int T,
                  int D) override;
  void sigmoid_gate_forward(float* y, const float* z, int zs, int N, int C, int group) override;
  void sigmoid_gate_backward(float* g, float* dz, int dzs, const float* dy, const float* o,
                             const float* z, int zs, int N, int C, int group) override;
  void axpby(float* y, float a, const float* x, float b, size_t n,
             const float* s = nullptr) override;
  void rela_norm_forward(float* y, float* r, float* mu, const float* u, const float* gamma,
                         const float* w, int N, int C, float eps, bool center) override;
  void rela_norm_backward(float* du, float* dgamma, float* dw, const float* dy, const float* u,
                          const float* r, const float* mu, const float* gamma, const float* w,
                          int N, int C, bool center) override;

 private:
  using Clock = std::chrono::steady_clock;
  friend class OpTimer;
  void record(const std::string& op, Clock::time_point t0);
  bool composes_gelu() const;
  std::string matmul_label(const char* op, int N, int C, int OC) const;

  std::string phase_;
  Clock::time_point phase_t0_{};
  std::vector<OpTime> ops_;
  std::map<std::pair<std::string, std::string>, size_t> index_;  // (phase, op) -> ops_ entry
  std::vector<std::pair<std::string, double>> phase_ms_;
  std::map<std::pair<int, int>, std::string> matmul_names_;
};

}  // namespace tda
