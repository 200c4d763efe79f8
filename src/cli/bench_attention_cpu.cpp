// tda bench attention on the CPU backend: forward and backward time of one attention layer per
// (kind, T) on random inputs (a trained checkpoint's: bench_attention_checkpoint.cpp).
//
// --kind K --T ...: one sequence, `heads` heads of dim 64 (the differential kinds pair
// heads, so they get two per head asked for), the variant driven as the model drives it
// (proj -> y -> dproj). fwd_ms/bwd_ms time the whole layer (pre/post ops included), kernel_*
// the attention kernels inside it (ProfileOps), tiles_* what the forward kernel skipped
// (ProbeOps). Memory: what the variant keeps between forward and backward plus its backward
// scratch, and the process's peak RSS.
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "attention/variant.h"
#include "backend/make_ops.h"
#include "backend/memory_check.h"
#include "backend/profile_ops.h"
#include "cli/bench_attention.h"
#include "core/config.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "core/rng.h"
#include "eval/diagnostics.h"

namespace tda {

namespace {
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double peak_rss_mb() {
  return double(process_memory().peak_rss) / double(1 << 20);
}

// One attention layer of `kind` on one sequence of T: `heads` heads of 64 (times the kind's
// head_multiple: the Diff kinds pair heads), its parameters at their init, proj and dy ~ N(0, 1),
// RoPE the identity (a benchmark of the kernels, not of positions).
struct RandomLayer {
  Config cfg;
  std::unique_ptr<AttentionVariant> attn;
  std::vector<std::vector<float>> extra_store, dextra_store;
  std::vector<float*> extra, dextra;
  std::vector<float> proj, y, dy, dproj, act, scratch, cosv, sinv;
  int H = 0;

  RandomLayer(const std::string& kind, int T, int heads) {
    const Config two = layer_config(kind, T, 2);  // an unknown kind throws, naming the known
    H = heads * make_attention(two.model, two.attention)->traits().head_multiple;
    cfg = layer_config(kind, T, H);
    attn = make_attention(cfg.model, cfg.attention);
    const Sizes z = sizes(*attn, cfg, T);
    Rng rng(1);
    for (const auto& spec : attn->extra_params(0)) {
      size_t n = 1;
      for (auto d : spec.shape) n *= size_t(d);
      extra_store.emplace_back(n);
      dextra_store.emplace_back(n, 0.f);
      init_param(extra_store.back().data(), n, spec.init, spec.a, rng);
    }
    for (size_t i = 0; i < extra_store.size(); ++i) {
      extra.push_back(extra_store[i].data());
      dextra.push_back(dextra_store[i].data());
    }
    proj.resize(z.proj);
    y.resize(z.y);
    dy.resize(z.y);
    dproj.resize(z.proj);
    for (auto& x : proj) x = rng.normal();
    for (auto& x : dy) x = rng.normal();
    act.resize(z.act);
    scratch.resize(z.scratch);
    cosv.assign(z.rope, 1.f);
    sinv.assign(z.rope, 0.f);
  }
  // What the constructor allocates, without allocating it (checked before, naming --lengths).
  static size_t bytes(const std::string& kind, int T, int heads) {
    const Config two = layer_config(kind, T, 2);
    const int h = heads * make_attention(two.model, two.attention)->traits().head_multiple;
    const Config c = layer_config(kind, T, h);
    const Sizes z = sizes(*make_attention(c.model, c.attention), c, T);
    return (2 * z.proj + 2 * z.y + z.act + z.scratch + 2 * z.rope) * sizeof(float);
  }
  AttnContext ctx(Ops& ops) const {
    const int T = cfg.model.seq_len;
    return AttnContext{ops, 1, T, 0, 1, 1000, cosv.data(), sinv.data(), 0};
  }

 private:
  struct Sizes {
    size_t proj, y, act, scratch, rope;  // floats of each buffer
  };
  static Sizes sizes(const AttentionVariant& attn, const Config& c, int T) {
    return {size_t(T) * size_t(attn.proj_width()), size_t(T) * size_t(c.model.d_model),
            attn.act_floats(1, T), attn.scratch_floats(1, T),
            size_t(T) * size_t(c.model.head_dim() / 2)};
  }
  static Config layer_config(const std::string& kind, int T, int H) {
    json j = {{"attention", {{"kind", kind}}},
              {"model", {{"n_layer", 1}, {"d_model", 64 * H}, {"n_head", H}, {"seq_len", T}}},
              {"train", {{"micro_batch", 1}, {"total_batch_tokens", T}}}};
    return config_from_json(j, "bench");
  }
};

int bench_random_attention(const std::vector<std::string>& kinds, const std::vector<int>& Ts,
                           int reps, int heads) {
  auto cpu_ops = make_ops("cpu");
  Ops& cpu = *cpu_ops;
  for (const auto& kind : kinds) {
    for (int T : Ts) {
      require_memory(cpu, {0, RandomLayer::bytes(kind, T, heads)},
                     "bench attention: --lengths " + std::to_string(T) + " (" + kind + ")");
      RandomLayer L(kind, T, heads);
      const int H = L.H;
      auto& attn = L.attn;
      // The variant calls ProfileOps (kernel times) -> ProbeOps (tile counts) -> the CPU backend.
      ProbeOps probe(cpu);
      probe.keep_maps = false;
      ProfileOps prof(probe);
      const AttnContext ctx = L.ctx(prof);
      auto& act = L.act;
      auto& scratch = L.scratch;
      double fwd = 0, bwd = 0;
      for (int rep = 0; rep < reps; ++rep) {
        auto t0 = Clock::now();
        attn->forward(ctx, L.proj.data(), L.y.data(), act.data(), L.extra);
        auto t1 = Clock::now();
        attn->backward(ctx, L.proj.data(), L.dy.data(), L.dproj.data(), act.data(), L.extra,
                       L.dextra, scratch.data());
        fwd += std::chrono::duration<double, std::milli>(t1 - t0).count() / reps;
        bwd += ms_since(t1) / reps;
      }
      double kfwd = 0, kbwd = 0;
      for (const auto& o : prof.ops()) {
        if (o.op.rfind("attention_forward", 0) == 0) kfwd += o.ms / reps;
        if (o.op.rfind("attention_backward", 0) == 0) kbwd += o.ms / reps;
      }
      long long skipped = 0, total = 0;
      for (const auto& t : probe.tiles) skipped += t.first, total += t.second;
      json out = {{"bench", "attention"},
                  {"kind", kind},
                  {"T", T},
                  {"source", "random"},
                  {"heads", H},
                  {"fwd_ms", fwd},
                  {"bwd_ms", bwd},
                  {"kernel_fwd_ms", kfwd},
                  {"kernel_bwd_ms", kbwd},
                  {"tiles_skipped", skipped / reps},
                  {"tiles_total", total / reps},
                  {"skip_fraction", total ? double(skipped) / double(total) : 0.0},
                  {"saved_plus_scratch_bytes", 4.0 * double(act.size() + scratch.size())},
                  {"bytes_per_token", 4.0 * double(act.size() + scratch.size()) / T},
                  {"peak_rss_mb", peak_rss_mb()}};
      std::cout << out.dump() << std::endl;
    }
  }
  return 0;
}
}  // namespace

AttnCall capture_attention_call(const std::string& kind, int T) {
  // Records the (b, h) = (0, 0) slice of the forward's kernel call, copied while it is live.
  struct Capture final : ForwardingOps {
    using ForwardingOps::ForwardingOps;
    AttnCall call;
    int calls = 0;
    void attention_forward(const AttnArgs& a) override {
      ForwardingOps::attention_forward(a);
      if (calls++) return;
      auto slice = [&](const float* p, size_t n) {
        return p ? std::vector<float>(p, p + n) : std::vector<float>();
      };
      const size_t nqk = size_t(a.T) * a.Dqk;
      call.args = a;
      call.q = slice(a.q, nqk);
      call.k = slice(a.k, nqk);
      call.v = slice(a.v, size_t(a.T) * a.Dv);
      call.q2 = slice(a.q2, nqk);
      call.k2 = slice(a.k2, nqk);
      call.tau = slice(a.tau, size_t(a.T));
      call.lambda = a.lambda ? *a.lambda : 0.f;
    }
  };
  auto cpu_ops = make_ops("cpu");
  Ops& cpu = *cpu_ops;
  Capture cap(cpu);
  RandomLayer L(kind, T, 1);
  L.attn->forward(L.ctx(cap), L.proj.data(), L.y.data(), L.act.data(), L.extra);
  TDA_CHECK(cap.calls == 1, "bench attention: kind " + kind + " made " + std::to_string(cap.calls) +
                                " attention calls, expected 1");
  return cap.call;
}

int bench_attention_cpu(const std::vector<std::string>& kinds, const std::vector<int>& Ts, int reps,
                        int heads) {
  TDA_CHECK(reps >= 1, "bench attention: --reps must be >= 1");
  TDA_CHECK(heads >= 1, "bench attention: --heads must be >= 1");
  return bench_random_attention(kinds, Ts, reps, heads);
}

}  // namespace tda
