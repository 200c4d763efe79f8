#include "backend/profile_ops.h"

#include <string>

namespace tda {

namespace {
std::string shape(long a, long b, long c) {
  return std::to_string(a) + "x" + std::to_string(b) + "x" + std::to_string(c);
}
}  // namespace

// Times one call from construction to destruction and books it under the current phase.
class OpTimer {
 public:
  OpTimer(ProfileOps* p, std::string op)
      : p_(p), op_(std::move(op)), t0_(ProfileOps::Clock::now()) {}
  ~OpTimer() { p_->record(op_, t0_); }

 private:
  ProfileOps* p_;
  std::string op_;
  ProfileOps::Clock::time_point t0_;
};

std::string ProfileOps::matmul_label(const char* op, int N, int C, int OC) const {
  auto it = matmul_names_.find({C, OC});
  const std::string name = it == matmul_names_.end() ? "" : " " + it->second;
  return std::string(op) + name + " " + shape(N, C, OC);
}

bool ProfileOps::composes_gelu() const {
  return std::string(in_.name()) == "cpu";
}

void ProfileOps::record(const std::string& op, Clock::time_point t0) {
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  auto key = std::make_pair(phase_, op);
  auto it = index_.find(key);
  if (it == index_.end()) {
    it = index_.emplace(key, ops_.size()).first;
    ops_.push_back(OpTime{phase_, op, 0, 0.0});
  }
  ops_[it->second].calls += 1;
  ops_[it->second].ms += ms;
}

void ProfileOps::set_phase(const std::string& phase) {
  const auto now = Clock::now();
  if (!phase_.empty()) {
    const double ms = std::chrono::duration<double, std::milli>(now - phase_t0_).count();
    auto it = phase_ms_.begin();
    while (it != phase_ms_.end() && it->first != phase_) ++it;
    if (it == phase_ms_.end())
      phase_ms_.emplace_back(phase_, ms);
    else
      it->second += ms;
  }
  phase_ = phase;
  phase_t0_ = now;
}

std::vector<std::pair<std::string, double>> ProfileOps::phases() const {
  return phase_ms_;
}

void ProfileOps::reset() {
  ops_.clear();
  index_.clear();
  phase_ms_.clear();
  phase_t0_ = Clock::now();
}

#define TDA_TIMED(label, call) \
  OpTimer timer_(this, label); \
  return call

void ProfileOps::matmul_forward(float* y, const float* x, const float* W, int N, int C, int OC) {
  TDA_TIMED(matmul_label("matmul_forward", N, C, OC), in_.matmul_forward(y, x, W, N, C, OC));
}
void ProfileOps::matmul_backward(float* dx, float* dW, const float* dy, const float* x,
                                 const float* W, int N, int C, int OC, bool acc) {
  TDA_TIMED(matmul_label("matmul_backward", N, C, OC),
            in_.matmul_backward(dx, dW, dy, x, W, N, C, OC, acc));
}
void ProfileOps::matmul_gelu_forward(float* y, float* pre, const float* x, const float* W, int N,
                                     int C, int OC) {
  // The CPU backend's fused op is the default composition: compose it here, so that its matmul
  // and GELU are timed apart. A backend that really fuses them (CUDA) is timed as one op.
  if (composes_gelu()) return Ops::matmul_gelu_forward(y, pre, x, W, N, C, OC);
  TDA_TIMED(matmul_label("matmul_gelu_forward", N, C, OC),
            in_.matmul_gelu_forward(y, pre, x, W, N, C, OC));
}
void ProfileOps::matmul_backward_dgelu(float* dpre, float* dW, const float* dy, const float* x,
                                       const float* W, const float* pre, int N, int C, int OC) {
  if (composes_gelu()) return Ops::matmul_backward_dgelu(dpre, dW, dy, x, W, pre, N, C, OC);
  TDA_TIMED(matmul_label("matmul_backward_dgelu", N, C, OC),
            in_.matmul_backward_dgelu(dpre, dW, dy, x, W, pre, N, C, OC));
}
void ProfileOps::rmsnorm_forward(float* y, float* rstd, const float* x, const float* w, int N,
                                 int C, float eps) {
  TDA_TIMED("rmsnorm_forward", in_.rmsnorm_forward(y, rstd, x, w, N, C, eps));
}
void ProfileOps::rmsnorm_backward(float* dx, float* dw, const float* dy, const float* x,
                                  const float* w, const float* rstd, int N, int C) {
  TDA_TIMED("rmsnorm_backward", in_.rmsnorm_backward(dx, dw, dy, x, w, rstd, N, C));
}
void ProfileOps::gelu_forward(float* y, const float* x, size_t n) {
  TDA_TIMED("gelu_forward", in_.gelu_forward(y, x, n));
}
void ProfileOps::gelu_backward(float* dx, const float* x, const float* dy, size_t n) {
  TDA_TIMED("gelu_backward", in_.gelu_backward(dx, x, dy, n));
}
void ProfileOps::add(float* y, const float* a, const float* b, size_t n) {
  TDA_TIMED("add", in_.add(y, a, b, n));
}
void ProfileOps::add_inplace(float* y, const float* a, size_t n) {
  TDA_TIMED("add_inplace", in_.add_inplace(y, a, n));
}
void ProfileOps::embedding_forward(float* y, const int32_t* t, const float* wte, int N, int C) {
  TDA_TIMED("embedding_forward", in_.embedding_forward(y, t, wte, N, C));
}
void ProfileOps::embedding_backward(float* dwte, const float* dy, const int32_t* t,
                                    const int32_t* plan, int N, int C) {
  TDA_TIMED("embedding_backward", in_.embedding_backward(dwte, dy, t, plan, N, C));
}
void ProfileOps::rope_forward(float* out, const float* x, int row, int col0, const float* cos,
                              const float* sin, int B, int T, int H, int D, int pos0) {
  TDA_TIMED("rope_forward", in_.rope_forward(out, x, row, col0, cos, sin, B, T, H, D, pos0));
}
void ProfileOps::rope_backward(float* dx, const float* dout, int row, int col0, const float* cos,
                               const float* sin, int B, int T, int H, int D, int pos0) {
  TDA_TIMED("rope_backward", in_.rope_backward(dx, dout, row, col0, cos, sin, B, T, H, D, pos0));
}
void ProfileOps::split_heads(float* out, const float* x, int row, int col0, int B, int T, int H,
                             int D) {
  TDA_TIMED("split_heads", in_.split_heads(out, x, row, col0, B, T, H, D));
}
void ProfileOps::merge_heads(float* x, const float* in, int row, int col0, int B, int T, int H,
                             int D) {
  TDA_TIMED("merge_heads", in_.merge_heads(x, in, row, col0, B, T, H, D));
}
void ProfileOps::lm_head_loss(float* losses, float* dx, float* dW, const float* x, const float* W,
                              const int32_t* targets, int N, int C, int Vp, int Vr, float gs) {
  TDA_TIMED(std::string(dx ? "lm_head_loss (fwd+bwd) " : "lm_head_loss (fwd) ") + shape(N, C, Vp),
            in_.lm_head_loss(losses, dx, dW, x, W, targets, N, C, Vp, Vr, gs));
}
void ProfileOps::attention_forward(const AttnArgs& a) {
  TDA_TIMED(std::string("attention_forward ") + attn_math_name(a.math), in_.attention_forward(a));
}
void ProfileOps::attention_backward(const AttnArgs& a) {
  TDA_TIMED(std::string("attention_backward ") + attn_math_name(a.math), in_.attention_backward(a));
}
double ProfileOps::sum_squares(const float* x, size_t n) {
  TDA_TIMED("sum_squares", in_.sum_squares(x, n));
}
void ProfileOps::scale(float* x, size_t n, float s) {
  TDA_TIMED("scale", in_.scale(x, n, s));
}
void ProfileOps::adamw(float* p, const float* g, float* m, float* v, size_t n, float lr, float b1,
                       float b2, float eps, float wd, int t) {
  TDA_TIMED("adamw", in_.adamw(p, g, m, v, n, lr, b1, b2, eps, wd, t));
}
void ProfileOps::adamw_clip_zero(float* p, float* g, float* m, float* v, size_t n, float lr,
                                 float b1, float b2, float eps, float wd, int t, float grad_scale) {
  TDA_TIMED("adamw_clip_zero",
            in_.adamw_clip_zero(p, g, m, v, n, lr, b1, b2, eps, wd, t, grad_scale));
}
void ProfileOps::zero(float* x, size_t n) {
  TDA_TIMED("zero", in_.zero(x, n));
}
void ProfileOps::l2norm_forward(float* x, float* norm, size_t N, int D) {
  TDA_TIMED("l2norm_forward", in_.l2norm_forward(x, norm, N, D));
}
void ProfileOps::l2norm_backward(float* dx, const float* xhat, const float* norm, size_t N, int D) {
  TDA_TIMED("l2norm_backward", in_.l2norm_backward(dx, xhat, norm, N, D));
}
void ProfileOps::row_dot(float* out, const float* a, const float* b, size_t N, int D) {
  TDA_TIMED("row_dot", in_.row_dot(out, a, b, N, D));
}
void ProfileOps::head_row_sum(float* dst, const float* x, const float* w, float scale, int B, int H,
                              int T) {
  TDA_TIMED("head_row_sum", in_.head_row_sum(dst, x, w, scale, B, H, T));
}
void ProfileOps::threshold_tau(float* out, const float* beta, float beta_fixed, bool derivative,
                               int T, double kappa, int d) {
  TDA_TIMED("threshold_tau", in_.threshold_tau(out, beta, beta_fixed, derivative, T, kappa, d));
}
void ProfileOps::scale_rows(float* y, const float* x, const float* f, int fs, int B, int H, int T,
                            int D) {
  TDA_TIMED("scale_rows", in_.scale_rows(y, x, f, fs, B, H, T, D));
}
void ProfileOps::sigmoid_gate_forward(float* y, const float* z, int zs, int N, int C, int group) {
  TDA_TIMED("sigmoid_gate_forward", in_.sigmoid_gate_forward(y, z, zs, N, C, group));
}
void ProfileOps::sigmoid_gate_backward(float* g, float* dz, int dzs, const float* dy,
                                       const float* o, const float* z, int zs, int N, int C,
                                       int group) {
  TDA_TIMED("sigmoid_gate_backward",
            in_.sigmoid_gate_backward(g, dz, dzs, dy, o, z, zs, N, C, group));
}
void ProfileOps::axpby(float* y, float a, const float* x, float b, size_t n, const float* s) {
  TDA_TIMED("axpby", in_.axpby(y, a, x, b, n, s));
}
void ProfileOps::rela_norm_forward(float* y, float* r, float* mu, const float* u,
                                   const float* gamma, const float* w, int N, int C, float eps,
                                   bool center) {
  TDA_TIMED("rela_norm_forward", in_.rela_norm_forward(y, r, mu, u, gamma, w, N, C, eps, center));
}
void ProfileOps::rela_norm_backward(float* du, float* dgamma, float* dw, const float* dy,
                                    const float* u, const float* r, const float* mu,
                                    const float* gamma, const float* w, int N, int C, bool center) {
  TDA_TIMED("rela_norm_backward",
            in_.rela_norm_backward(du, dgamma, dw, dy, u, r, mu, gamma, w, N, C, center));
}

#undef TDA_TIMED

}  // namespace tda
