// ProfileOps: an Ops decorator that times every call, by phase (named by the caller: the trainer
// says "forward", "backward", "optimizer", ...) and by op (its name, plus the shape for matmuls
// and the LM head), for `tda bench train --profile`. On the CPU backend an op's return is its
// end: the host clock times it. On a GPU (a backend whose Device::timed()) each call is
// bracketed by the device's own timer (CUDA events on its stream), read only when the times are
// asked for, so the profile holds the ops' device times without a sync per op. Each phase's wall
// time is kept as well: what it spent outside every op (data loading, host loops, thread wake-ups,
// a GPU waiting for its host) is the difference.
#pragma once
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/device.h"
#include "backend/forwarding_ops.h"
#include "backend/mixed_precision.h"

namespace tda {

// Times every op of backend/ops.def under its name.
class TimedOps : public ForwardingOps {
 public:
  explicit TimedOps(Ops& inner);

  // Everything timed from here on belongs to `phase` (until the next call); "" stops the
  // phase clock (time between steps is nobody's).
  void set_phase(const std::string& phase);
  void reset();  // forget what was timed (after a warm-up step)

  struct OpTime {
    std::string phase, op;
    long calls = 0;
    double ms = 0;
  };
  // In first-seen order (waits for the device timers still running).
  std::vector<OpTime> ops() const;
  // Wall time of each phase, in first-seen order.
  std::vector<std::pair<std::string, double>> phases() const;
  // Whether the times are the device's (its timer) rather than the host clock's.
  bool device_timed() const { return device_timing_; }

 protected:
  using Clock = std::chrono::steady_clock;
  // Books one call, from construction to destruction, under the current phase.
  class Timer {
   public:
    Timer(TimedOps* owner, std::string op) : owner_(owner), op_(std::move(op)), t0_(Clock::now()) {
      if (owner_->device_timing_) {
        dev_ = owner_->in_.device().timer();
        dev_->start();
      }
    }
    ~Timer() { owner_->record(op_, t0_, std::move(dev_)); }
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;

   private:
    TimedOps* owner_;
    std::string op_;
    Clock::time_point t0_;
    std::unique_ptr<DeviceTimer> dev_;
  };

 public:
#define TDA_OP(ret, fn, params, args) \
  ret fn params override {            \
    Timer timer(this, #fn);           \
    return in_.fn args;               \
  }
#include "backend/ops.def"

 private:
  void record(const std::string& op, Clock::time_point t0, std::unique_ptr<DeviceTimer> dev);
  void settle() const;  // adds the stopped device timers' times, then drops them

  bool device_timing_ = false;
  std::string phase_;
  Clock::time_point phase_t0_{};
  std::unique_ptr<DeviceTimer> phase_dev_;  // the current phase's, when device-timed
  // Times are read from device timers lazily (settle), so these change under const readers.
  mutable std::vector<OpTime> ops_;
  std::map<std::pair<std::string, std::string>, size_t> index_;  // (phase, op) -> ops_ entry
  mutable std::vector<std::pair<std::string, double>> phase_ms_;
  mutable std::vector<std::pair<size_t, std::unique_ptr<DeviceTimer>>> pending_ops_;
  mutable std::vector<std::pair<size_t, std::unique_ptr<DeviceTimer>>> pending_phases_;
};

// The profiler: TimedOps with the shapes of the matmuls and the LM head, and the mechanism of
// the attention calls, in their labels.
class ProfileOps final : public TimedOps {
 public:
  explicit ProfileOps(Ops& inner);
  ~ProfileOps() override;
  // Label matmuls of this (in, out) width with a layer name ("c_attn") beside their shape.
  void name_matmul(int C, int OC, const std::string& name) { matmul_names_[{C, OC}] = name; }

  void matmul_forward(float* y, const float* x, const float* W, int N, int C, int OC) override;
  void matmul_backward(float* dx, float* dW, const float* dy, const float* x, const float* W, int N,
                       int C, int OC, bool acc) override;
  void matmul_gelu_forward(float* y, float* pre, const float* x, const float* W, int N, int C,
                           int OC) override;
  void matmul_backward_dgelu(float* dpre, float* dW, const float* dy, const float* x,
                             const float* W, const float* pre, int N, int C, int OC) override;
  void matmul_residual_forward(float* y, const float* x, const float* W, int N, int C, int OC,
                               const float* r) override;
  void lm_head_loss(float* losses, float* dx, float* dW, const float* x, const float* W,
                    const int32_t* targets, int N, int C, int Vp, int Vr, float gs) override;
  void attention_forward(const AttnArgs& a) override;
  void attention_backward(const AttnArgs& a) override;
  // The bf16 MLP's calls (backend/mixed_precision.h) go to the capability, not through the Ops
  // above: a timed wrapper of the inner backend's, labelled like the matmuls.
  Bf16Matmuls* bf16_matmuls() override;

 private:
  class TimedBf16;
  std::unique_ptr<TimedBf16> bf16_;
  bool composes_fusions() const;  // the inner backend runs the fused matmuls' defaults
  std::string matmul_label(const char* op, int N, int C, int OC) const;
  std::map<std::pair<int, int>, std::string> matmul_names_;
};

}  // namespace tda
