#include "backend/profile_ops.h"

#include <string>

namespace tda {

namespace {
std::string shape(long a, long b, long c) {
  return std::to_string(a) + "x" + std::to_string(b) + "x" + std::to_string(c);
}
}  // namespace

std::string ProfileOps::matmul_label(const char* op, int N, int C, int OC) const {
  auto it = matmul_names_.find({C, OC});
  const std::string name = it == matmul_names_.end() ? "" : " " + it->second;
  return std::string(op) + name + " " + shape(N, C, OC);
}

bool ProfileOps::composes_fusions() const {
  return std::string(in_.name()) == "cpu";
}

TimedOps::TimedOps(Ops& inner)
    : ForwardingOps(inner), device_timing_(!inner.host_memory() && inner.device().timed()) {}

void TimedOps::record(const std::string& op, Clock::time_point t0,
                      std::unique_ptr<DeviceTimer> dev) {
  auto key = std::make_pair(phase_, op);
  auto it = index_.find(key);
  if (it == index_.end()) {
    it = index_.emplace(key, ops_.size()).first;
    ops_.push_back(OpTime{phase_, op, 0, 0.0});
  }
  ops_[it->second].calls += 1;
  if (dev) {
    dev->stop();
    pending_ops_.emplace_back(it->second, std::move(dev));
  } else {
    ops_[it->second].ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  }
}

void TimedOps::set_phase(const std::string& phase) {
  const auto now = Clock::now();
  if (!phase_.empty()) {
    auto it = phase_ms_.begin();
    while (it != phase_ms_.end() && it->first != phase_) ++it;
    if (it == phase_ms_.end()) it = phase_ms_.emplace(phase_ms_.end(), phase_, 0.0);
    if (phase_dev_) {
      phase_dev_->stop();
      pending_phases_.emplace_back(size_t(it - phase_ms_.begin()), std::move(phase_dev_));
    } else {
      it->second += std::chrono::duration<double, std::milli>(now - phase_t0_).count();
    }
  }
  phase_ = phase;
  phase_t0_ = now;
  phase_dev_.reset();
  if (device_timing_ && !phase_.empty()) {
    phase_dev_ = in_.device().timer();
    phase_dev_->start();
  }
}

void TimedOps::settle() const {
  for (auto& [i, t] : pending_ops_) ops_[i].ms += t->ms();
  for (auto& [i, t] : pending_phases_) phase_ms_[i].second += t->ms();
  pending_ops_.clear();
  pending_phases_.clear();
}

std::vector<TimedOps::OpTime> TimedOps::ops() const {
  settle();
  return ops_;
}

std::vector<std::pair<std::string, double>> TimedOps::phases() const {
  settle();
  return phase_ms_;
}

void TimedOps::reset() {
  settle();
  ops_.clear();
  index_.clear();
  phase_ms_.clear();
  phase_t0_ = Clock::now();
  if (phase_dev_) {  // the current phase restarts now
    phase_dev_ = in_.device().timer();
    phase_dev_->start();
  }
}

// Times `call` under `label`, bypassing TimedOps's own timer (which would book it twice).
#define TDA_TIMED(label, call) \
  Timer timer_(this, label);   \
  return call

void ProfileOps::matmul_forward(float* y, const float* x, const float* W, int N, int C, int OC) {
  TDA_TIMED(matmul_label("matmul_forward", N, C, OC),
            ForwardingOps::matmul_forward(y, x, W, N, C, OC));
}
void ProfileOps::matmul_backward(float* dx, float* dW, const float* dy, const float* x,
                                 const float* W, int N, int C, int OC, bool acc) {
  TDA_TIMED(matmul_label("matmul_backward", N, C, OC),
            ForwardingOps::matmul_backward(dx, dW, dy, x, W, N, C, OC, acc));
}
void ProfileOps::matmul_gelu_forward(float* y, float* pre, const float* x, const float* W, int N,
                                     int C, int OC) {
  // The CPU backend's fused ops are the default compositions: compose them here, so that the
  // matmul and its epilogue (GELU, residual add) are timed apart. A backend that really fuses
  // them (CUDA) is timed as one op.
  if (composes_fusions()) return Ops::matmul_gelu_forward(y, pre, x, W, N, C, OC);
  TDA_TIMED(matmul_label("matmul_gelu_forward", N, C, OC),
            ForwardingOps::matmul_gelu_forward(y, pre, x, W, N, C, OC));
}
void ProfileOps::matmul_backward_dgelu(float* dpre, float* dW, const float* dy, const float* x,
                                       const float* W, const float* pre, int N, int C, int OC) {
  if (composes_fusions()) return Ops::matmul_backward_dgelu(dpre, dW, dy, x, W, pre, N, C, OC);
  TDA_TIMED(matmul_label("matmul_backward_dgelu", N, C, OC),
            ForwardingOps::matmul_backward_dgelu(dpre, dW, dy, x, W, pre, N, C, OC));
}
void ProfileOps::matmul_residual_forward(float* y, const float* x, const float* W, int N, int C,
                                         int OC, const float* r) {
  if (composes_fusions()) return Ops::matmul_residual_forward(y, x, W, N, C, OC, r);
  TDA_TIMED(matmul_label("matmul_residual_forward", N, C, OC),
            ForwardingOps::matmul_residual_forward(y, x, W, N, C, OC, r));
}
void ProfileOps::lm_head_loss(float* losses, float* dx, float* dW, const float* x, const float* W,
                              const int32_t* targets, int N, int C, int Vp, int Vr, float gs) {
  TDA_TIMED(std::string(dx ? "lm_head_loss (fwd+bwd) " : "lm_head_loss (fwd) ") + shape(N, C, Vp),
            ForwardingOps::lm_head_loss(losses, dx, dW, x, W, targets, N, C, Vp, Vr, gs));
}
void ProfileOps::attention_forward(const AttnArgs& a) {
  TDA_TIMED(std::string("attention_forward ") + attn_math_name(a.math),
            ForwardingOps::attention_forward(a));
}
void ProfileOps::attention_backward(const AttnArgs& a) {
  TDA_TIMED(std::string("attention_backward ") + attn_math_name(a.math),
            ForwardingOps::attention_backward(a));
}

class ProfileOps::TimedBf16 final : public Bf16Matmuls {
 public:
  TimedBf16(ProfileOps& owner, Bf16Matmuls& in) : owner_(owner), in_(in) {}
  void enable_bf16_matmuls(const float* master, size_t n) override {
    in_.enable_bf16_matmuls(master, n);
  }
  void weights_changed() override { in_.weights_changed(); }
  void disable_bf16_matmuls() override { in_.disable_bf16_matmuls(); }
  void rmsnorm_forward_bf16(uint16_t* y, float* rstd, const float* x, const float* w, int N, int C,
                            float eps) override {
    Timer timer(&owner_, "rmsnorm_forward_bf16");
    in_.rmsnorm_forward_bf16(y, rstd, x, w, N, C, eps);
  }
  void store_bf16(uint16_t* y, const float* x, size_t n) override {
    Timer timer(&owner_, "store_bf16");
    in_.store_bf16(y, x, n);
  }
  void matmul_forward_bf16(float* y, const uint16_t* x, const float* W, int N, int C, int OC,
                           const float* r) override {
    Timer timer(&owner_, owner_.matmul_label("matmul_forward_bf16", N, C, OC));
    in_.matmul_forward_bf16(y, x, W, N, C, OC, r);
  }
  void matmul_backward_bf16(float* dx, float* dW, const float* dy, const uint16_t* x,
                            const float* W, int N, int C, int OC, bool acc) override {
    Timer timer(&owner_, owner_.matmul_label("matmul_backward_bf16", N, C, OC));
    in_.matmul_backward_bf16(dx, dW, dy, x, W, N, C, OC, acc);
  }
  void matmul_backward_bf16_dy(float* dx, float* dW, const uint16_t* dy, const uint16_t* x,
                               const float* W, int N, int C, int OC) override {
    Timer timer(&owner_, owner_.matmul_label("matmul_backward_bf16_dy", N, C, OC));
    in_.matmul_backward_bf16_dy(dx, dW, dy, x, W, N, C, OC);
  }
  void rmsnorm_backward_bf16(float* dx, uint16_t* dx16, float* dw, const float* dy, const float* x,
                             const float* w, const float* rstd, int N, int C) override {
    Timer timer(&owner_, "rmsnorm_backward_bf16");
    in_.rmsnorm_backward_bf16(dx, dx16, dw, dy, x, w, rstd, N, C);
  }
  void matmul_gelu_forward_bf16(uint16_t* y, uint16_t* pre, const uint16_t* x, const float* W,
                                int N, int C, int OC) override {
    Timer timer(&owner_, owner_.matmul_label("matmul_gelu_forward_bf16", N, C, OC));
    in_.matmul_gelu_forward_bf16(y, pre, x, W, N, C, OC);
  }
  void gelu_forward_bf16(uint16_t* y, const uint16_t* pre, size_t n) override {
    Timer timer(&owner_, "gelu_forward_bf16");
    in_.gelu_forward_bf16(y, pre, n);
  }
  void matmul_backward_dgelu_bf16(uint16_t* dpre16, float* prod, float* dW, const uint16_t* dy,
                                  const uint16_t* x, const float* W, const uint16_t* pre, int N,
                                  int C, int OC) override {
    Timer timer(&owner_, owner_.matmul_label("matmul_backward_dgelu_bf16", N, C, OC));
    in_.matmul_backward_dgelu_bf16(dpre16, prod, dW, dy, x, W, pre, N, C, OC);
  }
  size_t attention_saved_operands(const AttnArgs& a) const override {
    return in_.attention_saved_operands(a);
  }
  void l2norm_backward_saved(float* dx, const AttnArgs& a, AttnOperand which,
                             const float* norm) override {
    Timer timer(&owner_, "l2norm_backward_saved");
    in_.l2norm_backward_saved(dx, a, which, norm);
  }
  void row_dot_bf16(float* out, const uint16_t* a, const float* b, size_t N, int D) override {
    Timer timer(&owner_, "row_dot_bf16");
    in_.row_dot_bf16(out, a, b, N, D);
  }

 private:
  ProfileOps& owner_;
  Bf16Matmuls& in_;
};

ProfileOps::ProfileOps(Ops& inner) : TimedOps(inner) {}
ProfileOps::~ProfileOps() = default;

Bf16Matmuls* ProfileOps::bf16_matmuls() {
  Bf16Matmuls* in = ForwardingOps::bf16_matmuls();
  if (!in) return nullptr;
  if (!bf16_) bf16_ = std::make_unique<TimedBf16>(*this, *in);
  return bf16_.get();
}
#undef TDA_TIMED

}  // namespace tda
