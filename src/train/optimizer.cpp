#include "train/optimizer.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "distributed/grad_reducer.h"

namespace tda {

void AdamW::update(Ops& ops, float* p, float* g, float* const* state, size_t n, bool decay,
                   const OptimStep& s, bool zero_grad) {
  const float wd = decay ? float(o_.weight_decay) : 0.f;
  if (zero_grad) {  // one pass: clip, AdamW, g = 0
    ops.adamw_clip_zero(p, g, state[0], state[1], n, s.lr, float(o_.beta1), float(o_.beta2),
                        float(o_.eps), wd, s.t, s.grad_scale);
    return;
  }
  if (s.grad_scale != 1.f) ops.scale(g, n, s.grad_scale);
  ops.adamw(p, g, state[0], state[1], n, s.lr, float(o_.beta1), float(o_.beta2), float(o_.eps), wd,
            s.t);
}

std::unique_ptr<Optimizer> make_optimizer(const OptimConfig& o) {
  return std::make_unique<AdamW>(o);
}

std::vector<StateBuffer> state_buffers(const Optimizer& opt,
                                       std::vector<std::vector<float>>& state) {
  const auto specs = opt.state();
  TDA_CHECK(specs.size() == state.size(), "optimizer state: " + std::to_string(state.size()) +
                                              " buffers for " + opt.name() + "'s " +
                                              std::to_string(specs.size()));
  std::vector<StateBuffer> r;
  for (size_t k = 0; k < specs.size(); ++k) r.push_back({specs[k].name, state[k].data()});
  return r;
}

void DataParallelOptimizer::allocate_state(size_t n) {
  for (const auto& spec : opt_->state()) {
    state_.emplace_back(ops_, n, spec.what);
    ops_.zero(state_.back().data(), n);
  }
}

float* const* DataParallelOptimizer::state_at(size_t offset) {
  state_ptrs_.resize(state_.size());
  for (size_t k = 0; k < state_.size(); ++k) state_ptrs_[k] = state_[k].data() + offset;
  return state_ptrs_.data();
}

namespace {

// The clip factor of global-norm clipping at `norm` (1: none).
float clip_scale(const OptimConfig& o, double norm) {
  return o.grad_clip > 0 && norm > o.grad_clip ? float(o.grad_clip / (norm + 1e-6)) : 1.f;
}

class Replicated final : public DataParallelOptimizer {
 public:
  Replicated(std::unique_ptr<Optimizer> opt, GPT2& model, Ops& ops, Communicator& comm,
             const OptimConfig& o, const DistConfig& d)
      : DataParallelOptimizer(std::move(opt), model, ops, comm, o),
        bucket_bytes_(size_t(d.bucket_mb * double(1 << 20))) {
    allocate_state(model.flat_size());
  }

  // All-reduce the gradients (in dist.bucket_mb buckets), then global-norm clipping and the
  // update per tensor, every rank updating all parameters identically. Per tensor, so the
  // alignment gaps between tensors are never touched (they stay zero).
  void step(double lr, int t, double* norm, const std::function<void(double)>& check_norm,
            const std::function<void(const char*)>& phase) override {
    const size_t P = model_.flat_size();
    phase("grad_reduce");
    GradReducer(comm_, bucket_bytes_).reduce(model_.grads(), P);
    phase("grad_norm");
    *norm = std::sqrt(ops_.sum_squares(model_.grads(), P));
    check_norm(*norm);
    const OptimStep s{float(lr), t, clip_scale(o_, *norm)};
    phase(opt_->name().c_str());
    model_.update_params([&](float* params) {
      for (const auto& ten : model_.tensors())
        opt_->update(ops_, params + ten.offset, model_.grads() + ten.offset, state_at(ten.offset),
                     ten.numel, ten.decay, s, true);
    });
  }
  bool zeroes_grads() const override { return true; }

  std::vector<std::vector<float>> gather_state() override {
    std::vector<std::vector<float>> r;
    for (const auto& s : state_) r.push_back(s.to_host());
    return r;
  }
  void load_state(const std::vector<std::vector<float>>& full) override {
    for (size_t k = 0; k < state_.size(); ++k) state_[k].upload(full[k].data(), state_[k].size());
  }

 private:
  size_t bucket_bytes_;
};

class Zero1 final : public DataParallelOptimizer {
 public:
  Zero1(std::unique_ptr<Optimizer> opt, GPT2& model, Ops& ops, Communicator& comm,
        const OptimConfig& o)
      : DataParallelOptimizer(std::move(opt), model, ops, comm, o) {
    const size_t P = model.flat_size(), W = size_t(comm.world());
    shard_n_ = (P + W - 1) / W;
    lo_ = size_t(comm.rank()) * shard_n_;
    hi_ = std::max(lo_, std::min(lo_ + shard_n_, P));
    if (shard_n_ * W != P) {  // else work in the model's buffers
      flat_ = DeviceArray<float>(ops, shard_n_ * W, "ZeRO-1 padded gradients");
      ops.zero(flat_.data(), flat_.size());
    }
    allocate_state(shard_n_);
  }

  // Reduce-scatter the gradients, clip by the global norm (a double all-reduce of the shards'
  // sums of squares), update this rank's slice only, all-gather the parameters.
  void step(double lr, int t, double* norm, const std::function<void(double)>& check_norm,
            const std::function<void(const char*)>&) override {
    const size_t P = model_.flat_size(), n = padded();
    float* g = model_.grads();
    if (!flat_.empty()) {  // P is not a multiple of W: work in a zero-padded copy
      ops_.copy(flat_.data(), model_.grads(), P * sizeof(float));
      ops_.zero(flat_.data() + P, n - P);
      g = flat_.data();
    }
    comm_.reduce_scatter_sum(g, n);
    *norm = std::sqrt(comm_.all_reduce_sum(ops_.sum_squares(g + lo_, shard_n_)));
    check_norm(*norm);
    const float clip = clip_scale(o_, *norm);
    if (clip != 1.f) ops_.scale(g + lo_, shard_n_, clip);  // the whole slice, gaps included
    const OptimStep s{float(lr), t, 1.f};
    model_.update_params([&](float* params) {
      for (const auto& ten : model_.tensors()) {
        const size_t a = std::max(lo_, ten.offset), b = std::min(hi_, ten.offset + ten.numel);
        if (a >= b) continue;
        opt_->update(ops_, params + a, g + a, state_at(a - lo_), b - a, ten.decay, s, false);
      }
      if (flat_.empty()) {
        comm_.all_gather(params, n);
      } else {
        ops_.copy(flat_.data() + lo_, params + lo_, (hi_ - lo_) * sizeof(float));
        ops_.zero(flat_.data() + hi_, lo_ + shard_n_ - hi_);
        comm_.all_gather(flat_.data(), n);
        ops_.copy(params, flat_.data(), P * sizeof(float));
      }
    });
  }
  bool zeroes_grads() const override { return false; }

  std::vector<std::vector<float>> gather_state() override {
    std::vector<std::vector<float>> r;
    for (const auto& s : state_) {
      if (comm_.world() == 1) {  // the whole state is this rank's
        r.push_back(s.to_host());
        continue;
      }
      std::vector<float> full(padded(), 0.f);
      s.download(full.data() + lo_, shard_n_);
      comm_.all_gather(full.data(), full.size());
      full.resize(model_.flat_size());
      r.push_back(std::move(full));
    }
    return r;
  }
  void load_state(const std::vector<std::vector<float>>& full) override {
    for (size_t k = 0; k < state_.size(); ++k)  // past P (the padding) stays zero
      state_[k].upload(full[k].data() + lo_, hi_ - lo_);
  }

 private:
  size_t padded() const { return shard_n_ * size_t(comm_.world()); }
  size_t shard_n_ = 0, lo_ = 0, hi_ = 0;  // this rank's slice [lo_, lo_ + shard_n_), hi_ <= P
  DeviceArray<float> flat_;               // P % W != 0: padded copy for reduce-scatter/gather
};

}  // namespace

std::unique_ptr<DataParallelOptimizer> make_data_parallel_optimizer(std::unique_ptr<Optimizer> opt,
                                                                    GPT2& model, Ops& ops,
                                                                    Communicator& comm,
                                                                    const OptimConfig& o,
                                                                    const DistConfig& d) {
  TDA_CHECK(d.zero_stage == 0 || d.zero_stage == 1,
            "config: dist.zero_stage must be 0 or 1, got " + std::to_string(d.zero_stage));
  if (d.zero_stage == 1) return std::make_unique<Zero1>(std::move(opt), model, ops, comm, o);
  return std::make_unique<Replicated>(std::move(opt), model, ops, comm, o, d);
}

}  // namespace tda
