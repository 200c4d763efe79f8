// Optimizers, and where their state lives across data-parallel ranks.
//
// An Optimizer declares its state (named buffers of one float per parameter element: AdamW's
// exp_avg and exp_avg_sq) and updates one tensor's range of the flat parameter buffer from its
// gradient. It knows nothing of ranks: a DataParallelOptimizer owns the state in the backend's
// memory and runs the step around the update (gradient reduction, global-norm clipping, the
// parameter exchange). Two of them:
//   Replicated  every rank holds all of the state; gradients are all-reduced (in buckets) and
//               every rank updates every parameter identically, clip and gradient zeroing fused
//               into the update's pass.
//   ZeRO-1      (dist.zero_stage 1) rank r holds the state of the contiguous slice
//               [r S, (r+1) S) of the flat buffer (S = ceil(P / W)); gradients are
//               reduce-scattered, each rank updates its slice (a slice may cut through tensors:
//               each tensor's range is intersected with it, so weight decay is still decided per
//               tensor) and the parameters are all-gathered.
// Checkpoints hold the full state whatever the sharding (gather_state / load_state), named
// "<param>.<state name>", so a run resumes on any number of ranks.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/device_array.h"
#include "backend/ops.h"
#include "core/config.h"
#include "distributed/communicator.h"
#include "model/gpt2.h"
#include "train/checkpoint.h"

namespace tda {

// One update's scalars: learning rate, step t >= 1 (bias correction), and the factor the
// gradient is multiplied by first (global-norm clipping; 1: none).
struct OptimStep {
  float lr;
  int t;
  float grad_scale;
};

// One state buffer: its name in checkpoints ("<param>.<name>") and in memory reports.
struct OptimizerStateSpec {
  std::string name, what;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  // Its state buffers, one float per parameter element each, in this order.
  virtual std::vector<OptimizerStateSpec> state() const = 0;
  // Updates n elements of one tensor: p from g * s.grad_scale, state[k] the same range of state
  // buffer k; decay: the tensor takes weight decay. zero_grad: g is left 0 for the next step's
  // accumulation (the replicated step fuses it into this pass).
  virtual void update(Ops& ops, float* p, float* g, float* const* state, size_t n, bool decay,
                      const OptimStep& s, bool zero_grad) = 0;
};

// AdamW with decoupled weight decay (Loshchilov & Hutter), state m (exp_avg) and v (exp_avg_sq)
// as PyTorch names them; the math is Ops::adamw (backend/ops.def).
class AdamW final : public Optimizer {
 public:
  explicit AdamW(const OptimConfig& o) : o_(o) {}
  std::string name() const override { return "adamw"; }
  std::vector<OptimizerStateSpec> state() const override {
    return {{"exp_avg", "AdamW m"}, {"exp_avg_sq", "AdamW v"}};
  }
  void update(Ops& ops, float* p, float* g, float* const* state, size_t n, bool decay,
              const OptimStep& s, bool zero_grad) override;

 private:
  OptimConfig o_;
};

std::unique_ptr<Optimizer> make_optimizer(const OptimConfig& o);

// Host copies of an optimizer's state (in state() order) as checkpoints name them.
std::vector<StateBuffer> state_buffers(const Optimizer& opt,
                                       std::vector<std::vector<float>>& state);

class DataParallelOptimizer {
 public:
  virtual ~DataParallelOptimizer() = default;
  // One step on the model's accumulated gradients (summed over micro-batches, not yet over
  // ranks). *norm: the global gradient norm, passed to check_norm before anything is updated.
  // phase names the profiler's phases.
  virtual void step(double lr, int t, double* norm, const std::function<void(double)>& check_norm,
                    const std::function<void(const char*)>& phase) = 0;
  // True when the step left the gradients zero (the next step needs no zeroing pass).
  virtual bool zeroes_grads() const = 0;
  // Full host copies of each state buffer (flat_size() floats; a collective under ZeRO-1: every
  // rank calls it), in state() order.
  virtual std::vector<std::vector<float>> gather_state() = 0;
  // Takes each rank's share of full host state (flat_size() floats each, on every rank).
  virtual void load_state(const std::vector<std::vector<float>>& full) = 0;
  const Optimizer& optimizer() const { return *opt_; }

 protected:
  DataParallelOptimizer(std::unique_ptr<Optimizer> opt, GPT2& model, Ops& ops, Communicator& comm,
                        const OptimConfig& o)
      : opt_(std::move(opt)), model_(model), ops_(ops), comm_(comm), o_(o) {}
  // State buffers of n floats each, zeroed, in the backend's memory.
  void allocate_state(size_t n);
  // Each buffer + offset, in a member array (no allocation per tensor per step); valid until
  // the next call.
  float* const* state_at(size_t offset);

  std::unique_ptr<Optimizer> opt_;
  GPT2& model_;
  Ops& ops_;
  Communicator& comm_;
  OptimConfig o_;
  std::vector<DeviceArray<float>> state_;
  std::vector<float*> state_ptrs_;
};

// dist.zero_stage 0: Replicated; 1: ZeRO-1 (the file's header).
std::unique_ptr<DataParallelOptimizer> make_data_parallel_optimizer(std::unique_ptr<Optimizer> opt,
                                                                    GPT2& model, Ops& ops,
                                                                    Communicator& comm,
                                                                    const OptimConfig& o,
                                                                    const DistConfig& d);

}  // namespace tda
