// tda bench attention --device cuda --mode time: forward + backward of one attention layer of
// each kind on the CUDA backend, timed with CUDA events (backend/device.h), the way the GPU
// kit (scripts/gpu/check.sh, docs/gpu.md) sets it beside PyTorch's scaled_dot_product_attention.
//
// Problem: B = max(1, tokens / T) sequences of T tokens, `heads` heads of dimension 64
// (d_model = 64 heads; the differential kinds pair them: heads/2 pairs of (64, 128)), the
// layer's input projection filled with N(0, 1), RoPE tables the identity (as the CPU bench).
// Synthetic inputs: the TRA/TDA thresholds then see random unit q, k (the null model of
// docs/cuda.md), whose tiles are sparser than a trained model's.
//
// Per rep (after `warmup` untimed ones, the first of which counts the skipped tiles):
//   layer_fwd / layer_bwd   the variant's forward / backward (RoPE, splits, norms, gates, the
//                           attention kernels, every sync point the variant has)
//   kernel_fwd / kernel_bwd the Ops::attention_forward / attention_backward calls inside them
// Reported: the median over reps of each, in ms.
#include "cli/bench_gpu.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <vector>

#include "attention/variant.h"
#include "backend/attention_tuning.h"
#include "backend/device.h"
#include "backend/device_array.h"
#include "backend/forwarding_ops.h"
#include "core/config.h"
#include "core/error.h"
#include "core/rng.h"

namespace tda {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

namespace {

// Records a timer pair around every attention kernel call (a variant may make more than one),
// and on request attaches the tile counters to the next forward.
class KernelTimingOps : public ForwardingOps {
 public:
  explicit KernelTimingOps(Ops& inner)
      : ForwardingOps(inner), counters_(inner, 2, "bench tile counters") {}

  void attention_forward(const AttnArgs& a) override {
    AttnArgs b = a;
    if (count_next_) {
      const long long zero[2] = {0, 0};
      counters_.upload(zero, 2);
      b.tiles_skipped = counters_.data();
      b.tiles_total = counters_.data() + 1;
      count_next_ = false;
    }
    timed(fwd_, [&] { ForwardingOps::attention_forward(b); });
  }
  void attention_backward(const AttnArgs& a) override {
    AttnArgs asked = a;  // what attention.deterministic false asks of the call
    asked.atomic_dq = true;
    served_atomic_ = attn_backward_atomic(asked);
    head_dims_ = {a.Dqk, a.Dv};
    timed(bwd_, [&] { ForwardingOps::attention_backward(a); });
  }
  // Whether the latest backward call could take the single kernel with dq by atomics.
  bool served_atomic() const { return served_atomic_; }
  // The latest backward call's (Dqk, Dv): a tuning table's key (backend/attention_tuning.h).
  std::pair<int, int> head_dims() const { return head_dims_; }

  void count_next_forward() { count_next_ = true; }
  void tiles(long long* skipped, long long* total) const {
    long long h[2] = {0, 0};
    counters_.download(h, 2);
    *skipped = h[0];
    *total = h[1];
  }
  // Milliseconds of this rep's forward / backward kernel calls; starts the next rep.
  void take(double* fwd_ms, double* bwd_ms) {
    *fwd_ms = sum(fwd_);
    *bwd_ms = sum(bwd_);
    fwd_.used = bwd_.used = 0;
  }

 private:
  struct Timers {
    std::vector<std::unique_ptr<DeviceTimer>> t;
    size_t used = 0;
  };
  template <class F>
  void timed(Timers& ts, F&& f) {
    if (ts.used == ts.t.size()) ts.t.push_back(in_.device().timer());
    DeviceTimer& t = *ts.t[ts.used++];
    t.start();
    f();
    t.stop();
  }
  static double sum(Timers& ts) {
    double s = 0;
    for (size_t i = 0; i < ts.used; ++i) s += ts.t[i]->ms();
    return s;
  }
  DeviceArray<long long> counters_;
  bool count_next_ = false, served_atomic_ = false;
  std::pair<int, int> head_dims_ = {0, 0};
  Timers fwd_, bwd_;
};

}  // namespace

int bench_attention_gpu(Ops& backend, const std::vector<std::string>& kinds,
                        const std::vector<int>& Ts, const GpuAttnBench& o,
                        std::vector<json>* records) {
  TDA_CHECK(o.heads >= 2 && o.heads % 2 == 0,
            "bench attention: --heads must be even and >= 2 (the differential kinds pair heads)");
  TDA_CHECK(o.reps >= 1 && o.warmup >= 1, "bench attention: --reps and --warmup must be >= 1");
  KernelTimingOps ops(backend);
  // N(0, 1) values drawn once and shared by every (kind, T): drawing 16k x 5C floats on the host
  // per problem would take longer than timing it. proj and dy read the same pool.
  Rng rng(1);
  std::vector<float> normals;
  auto upload_normals = [&](DeviceArray<float>& d) {
    while (normals.size() < d.size()) normals.push_back(rng.normal());
    d.upload(normals.data(), d.size());
  };
  Device& gpu = ops.device();
  const std::string timer = gpu.clock();
  const std::string device = gpu.name(), arch = gpu.arch();
  for (const auto& kind : kinds) {
    for (int T : Ts)
      for (const AttnFwdShape& asked : o.fwd_shapes)
        for (const bool det : o.deterministic)
          for (const int stages : o.bwd_stages) {
            const int B = std::max(1, o.tokens / T), C = 64 * o.heads;
            json j = {
                {"attention", {{"kind", kind}}},
                {"model", {{"n_layer", 1}, {"d_model", C}, {"n_head", o.heads}, {"seq_len", T}}},
                {"train", {{"micro_batch", B}, {"total_batch_tokens", B * T}}}};
            const Config cfg = config_from_json(j, "bench");
            auto attn = make_attention(cfg.model, cfg.attention);
            // what our kernels run these calls with (the timed ones count nothing); the Diff kinds
            // pair heads: Dv 128
            AttnArgs shape;
            shape.math = attn->math();
            shape.Dqk = 64;
            shape.Dv = 64 * attn->traits().head_multiple;
            shape.fwd_block_rows = asked.rows;
            shape.fwd_block_keys = asked.keys;
            shape.bwd_stages = stages;
            shape.atomic_dq = !det;
            const AttnFwdShape ran = attn_forward_shape(shape);
            const int stages_ran = attn_backward_stages(shape);
            // a kind that cannot take a shape would repeat its 64 x 64 line (one stage)
            const bool asked_other =
                asked.rows && (ran.rows != asked.rows || ran.keys != asked.keys);
            if (asked_other && o.fwd_shapes.size() > 1) continue;
            if (stages && stages != stages_ran && o.bwd_stages.size() > 1) continue;
            // the backward does not depend on the forward's shape: with both lists, the single
            // backward kernel and the stages after the first are timed at the first shape only
            const bool first_shape = &asked == &o.fwd_shapes[0];
            if (!det && !first_shape && o.deterministic.size() > 1) continue;
            if (stages != o.bwd_stages[0] && !first_shape) continue;
            const int W = attn->proj_width(), D = cfg.model.head_dim();
            const size_t N = size_t(B) * T;
            auto filled = [&](size_t n, auto&& fill) {
              std::vector<float> h(n);
              fill(h);
              DeviceArray<float> d(ops, n, "bench input");
              d.upload(h.data(), n);
              return d;
            };
            std::vector<DeviceArray<float>> extra_store, dextra_store;
            std::vector<float*> extra, dextra;
            for (const auto& spec : attn->extra_params(0)) {
              size_t n = 1;
              for (auto d : spec.shape) n *= size_t(d);
              extra_store.push_back(filled(n, [&](std::vector<float>& h) {
                init_param(h.data(), n, spec.init, spec.a, rng);
              }));
              dextra_store.push_back(
                  filled(n, [](std::vector<float>& h) { std::fill(h.begin(), h.end(), 0.f); }));
              extra.push_back(extra_store.back().data());
              dextra.push_back(dextra_store.back().data());
            }
            DeviceArray<float> proj(ops, N * W, "bench proj"), dy(ops, N * C, "bench dy");
            upload_normals(proj);
            upload_normals(dy);
            DeviceArray<float> cosv = filled(size_t(T) * D / 2, [](std::vector<float>& h) {
              std::fill(h.begin(), h.end(), 1.f);
            });
            DeviceArray<float> sinv = filled(size_t(T) * D / 2, [](std::vector<float>& h) {
              std::fill(h.begin(), h.end(), 0.f);
            });
            DeviceArray<float> y(ops, N * C, "bench y"), dproj(ops, N * W, "bench dproj"),
                act(ops, attn->act_floats(B, T), "attention activations"),
                scratch(ops, attn->scratch_floats(B, T), "attention scratch");
            AttnContext ctx{ops, B, T, 0, 1, 1000, cosv.data(), sinv.data(), 0};
            const std::string impl = ops.set_attention_impl(
                {o.impl, false, kind, attn->math(), asked.rows, det, "none", asked.keys, stages});
            std::unique_ptr<DeviceTimer> tf = gpu.timer(), tb = gpu.timer();
            std::vector<double> lf, lb, kf, kb;
            // The counted first forward runs on our kernels (a vendor counts no tiles); another
            // untimed rep then holds the vendor's self-check and graph builds.
            const int untimed = o.warmup + (o.impl == "own" ? 0 : 1);
            for (int rep = 0; rep < untimed + o.reps; ++rep) {
              if (rep == 0) ops.count_next_forward();
              tf->start();
              attn->forward(ctx, proj.data(), y.data(), act.data(), extra);
              tf->stop();
              tb->start();
              attn->backward(ctx, proj.data(), dy.data(), dproj.data(), act.data(), extra, dextra,
                             scratch.data());
              tb->stop();
              double f = 0, b = 0;
              ops.take(&f, &b);
              if (rep < untimed) continue;
              lf.push_back(tf->ms());
              lb.push_back(tb->ms());
              kf.push_back(f);
              kb.push_back(b);
            }
            gpu.synchronize();
            long long skipped = 0, total = 0;
            ops.tiles(&skipped, &total);
            // Dense causal softmax attention at this shape (FlashAttention's convention): forward
            // 4 B H T^2 D / 2, backward 2.5 times that.
            const double sm_fwd = 4.0 * B * o.heads * double(T) * T * 64 / 2;
            json out = {{"bench", "attention"},
                        {"device", "cuda"},
                        {"mode", "time"},
                        {"kind", kind},
                        {"attention_impl", o.impl},
                        {"attention_impl_line", impl},
                        {"fwd_shape", asked.rows || asked.keys ? fwd_shape_name(asked) : "0"},
                        {"fwd_shape_ran", fwd_shape_name(ran)},
                        {"deterministic", det},
                        {"bwd_atomic_ran", !det && ops.served_atomic()},
                        {"bwd_stages", stages},
                        {"bwd_stages_ran", stages_ran},
                        {"T", T},
                        {"B", B},
                        {"heads", o.heads},
                        {"head_dim", 64},
                        {"head_dims", {ops.head_dims().first, ops.head_dims().second}},
                        {"arch", arch},
                        {"timer", timer},
                        {"device_name", device},
                        {"reps", o.reps},
                        {"warmup", o.warmup},
                        {"layer_fwd_ms", median(lf)},
                        {"layer_bwd_ms", median(lb)},
                        {"kernel_fwd_ms", median(kf)},
                        {"kernel_bwd_ms", median(kb)},
                        {"softmax_fwd_gflop", sm_fwd / 1e9},
                        {"softmax_bwd_gflop", 2.5 * sm_fwd / 1e9},
                        {"tiles_total", total},
                        {"tiles_skipped", skipped},
                        {"skip_fraction", total ? double(skipped) / double(total) : 0.0},
                        {"saved_plus_scratch_bytes",
                         4.0 * double(attn->act_floats(B, T) + attn->scratch_floats(B, T))}};
            if (o.print) std::cout << out.dump() << std::endl;
            if (records) records->push_back(out);
          }
  }
  return 0;
}

}  // namespace tda
