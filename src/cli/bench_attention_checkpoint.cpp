// tda bench attention --checkpoint DIR: the attention kernels timed on the q, k, v a trained
// model computes from real tokens, on the CPU or on a GPU (the paper's >99% zeros are a trained
// model's; N(0, 1) inputs are the null model).
//
// The checkpoint's model (its kind; the RoPE table extended to the longest T: a benchmark of the
// kernels, not of quality) reads windows of T tokens of --tokens-file (window b starts at b * T,
// wrapping around a shard shorter than that): one on the CPU; on a GPU as many as make the
// random problem's (b, h) slices (CheckpointAttnBench::tokens, heads). Its forward runs on the
// bench's backend through ProbeOps, which records every layer's kernel call and the tiles its
// forward skipped. The calls of the chosen layer (or of every layer) are then timed again with the
// backend's timer, forward then backward (dout ~ N(0, 1)): after `warmup` untimed repetitions,
// the median over `reps` of their time summed over the layers timed (layers_timed).
// exact_zero_fraction: the share of causal weights A_ij (j <= i) that are exactly 0, over every
// head of the first window, from the maps eval/diagnostics.h rebuilds on the host (T <= 2048).
// Entmax on the CUDA backend: threshold_tiles, the score tiles its threshold search computed,
// threshold_tiles_dense without its tile skip, and threshold_skip_fraction = 1 - their ratio.
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "backend/device.h"
#include "backend/device_array.h"
#include "cli/bench_attention.h"
#include "cli/bench_gpu.h"
#include "core/config.h"
#include "core/error.h"
#include "core/rng.h"
#include "data/shard.h"
#include "eval/diagnostics.h"
#include "model/gpt2.h"
#include "train/checkpoint.h"

namespace tda {

namespace {

constexpr int kMaxZerosT = 2048;  // the maps are T x T floats per head on the host

// Gradient buffers of one captured call (its layout: compact or the Diff kinds' strided q, k).
struct CallGrads {
  DeviceArray<float> dout, dq, dk, dv, dq2, dk2, drow_tau, drow_lambda;
  CallGrads(Ops& ops, const AttnArgs& c, Rng& rng) {
    const size_t sqk = c.qk_bh_stride ? c.qk_bh_stride : size_t(c.T) * c.Dqk;
    const size_t BH = size_t(c.B) * c.H, nqk = (BH - 1) * sqk + size_t(c.T) * c.Dqk;
    const size_t nv = BH * size_t(c.T) * c.Dv, rows = BH * size_t(c.T);
    const char* what = "bench attention gradients";
    dout = DeviceArray<float>(ops, nv, what);
    std::vector<float> h(nv);
    for (auto& x : h) x = rng.normal();
    dout.upload(h.data(), nv);
    dq = DeviceArray<float>(ops, nqk, what);
    dk = DeviceArray<float>(ops, nqk, what);
    dv = DeviceArray<float>(ops, nv, what);
    if (c.q2) {
      dq2 = DeviceArray<float>(ops, nqk, what);
      dk2 = DeviceArray<float>(ops, nqk, what);
    }
    drow_tau = DeviceArray<float>(ops, rows, what);
    drow_lambda = DeviceArray<float>(ops, rows, what);
  }
  AttnArgs backward_args(AttnArgs a) {
    a.dout = dout.data();
    a.dq = dq.data();
    a.dk = dk.data();
    a.dv = dv.data();
    a.dq2 = a.q2 ? dq2.data() : nullptr;
    a.dk2 = a.q2 ? dk2.data() : nullptr;
    a.drow_tau = drow_tau.data();
    a.drow_lambda = drow_lambda.data();
    return a;
  }
};

// Exact zeros of the effective map of every head of batch element 0.
struct ZeroCount {
  double zeros = 0, causal = 0;
  void add(const AttnArgs& a) {
    const double n = double(a.T) * (a.T + 1) / 2;
    for (int h = 0; h < a.H; ++h) {
      zeros += map_stats(materialize_head(a, 0, h)[0].data(), a.T).sparsity * n;
      causal += n;
    }
  }
};

std::vector<int32_t> windows(const std::vector<uint16_t>& tokens, int T, int sequences) {
  std::vector<int32_t> in(size_t(sequences) * T);
  for (size_t i = 0; i < in.size(); ++i) in[i] = tokens[i % tokens.size()];
  return in;
}

}  // namespace

int bench_checkpoint_attention(Ops& backend, const std::vector<int>& Ts,
                               const CheckpointAttnBench& o) {
  TDA_CHECK(o.reps >= 1 && o.warmup >= 0, "bench attention: --reps must be >= 1");
  Config cfg = config_from_json(read_checkpoint_state(o.dir).config, o.dir + "/state.json");
  int T_max = 0;
  for (int T : Ts) T_max = std::max(T_max, T);
  cfg.model.seq_len = std::max(cfg.model.seq_len, T_max);
  TDA_CHECK(o.layer < cfg.model.n_layer, "bench attention: --layer " + std::to_string(o.layer) +
                                             " but " + o.dir + " has " +
                                             std::to_string(cfg.model.n_layer) + " layers");
  const auto tokens = read_shard(o.tokens_file, cfg.model.real_vocab_size);
  TDA_CHECK(tokens.size() >= size_t(T_max), "bench attention: " + o.tokens_file + " holds " +
                                                std::to_string(tokens.size()) +
                                                " tokens, fewer than --T " + std::to_string(T_max));
  ProbeOps probe(backend);
  probe.keep_maps = false;
  ZeroCount zc;
  bool count_zeros = false;
  int call_index = 0;  // the layer of the call on_attention sees
  probe.on_attention = [&](const AttnArgs& a) {
    if (count_zeros && (o.layer < 0 || call_index == o.layer)) zc.add(a);
    ++call_index;
  };
  GPT2 model(cfg.model, cfg.attention, probe, "fp32");
  const TrainState st = load_checkpoint(o.dir, model);
  model.set_step(st.step);
  Device& dev = backend.device();
  for (int T : Ts) {
    const int sequences =
        o.tokens > 0 ? std::max(1, o.tokens / T) * std::max(1, o.heads / cfg.model.n_head) : 1;
    const std::vector<int32_t> in = windows(tokens, T, sequences);
    std::vector<int32_t> targets(in.begin() + 1, in.end());
    targets.push_back(in.front());
    model.set_batch(sequences, T);
    probe.calls.clear();
    probe.tiles.clear();
    zc = ZeroCount();
    call_index = 0;
    count_zeros = T <= kMaxZerosT;
    model.forward(in.data(), targets.data(), false, 1.f);
    count_zeros = false;
    std::vector<AttnArgs> calls;
    long long skipped = 0, total = 0;
    for (size_t l = 0; l < probe.calls.size(); ++l) {
      if (o.layer >= 0 && int(l) != o.layer) continue;
      AttnArgs a = probe.calls[l];
      a.tiles_skipped = a.tiles_total = a.entmax_threshold_tiles = nullptr;
      a.survivors = nullptr;
      calls.push_back(a);
      skipped += probe.tiles[l].first;
      total += probe.tiles[l].second;
    }
    // Entmax's threshold search (CUDA): the score tiles it computed, and with its tile skip off
    // (no_skip): the share of the search the model's scores let it skip. The CPU backend solves
    // each row from its scores and counts none.
    DeviceArray<long long> counter(backend, 1, "bench attention counters");
    long long thr = 0, thr_dense = 0;
    for (const AttnArgs& c : calls) {
      if (c.math != AttnMath::kEntmax) continue;
      for (bool dense : {false, true}) {
        AttnArgs a = c;
        a.no_skip = dense;
        a.entmax_threshold_tiles = counter.data();
        const long long zero = 0;
        counter.upload(&zero, 1);
        backend.attention_forward(a);
        long long n = 0;
        counter.download(&n, 1);
        (dense ? thr_dense : thr) += n;
      }
    }
    Rng rng(1);
    std::vector<CallGrads> grads;
    grads.reserve(calls.size());
    for (const AttnArgs& a : calls) grads.emplace_back(backend, a, rng);
    std::vector<std::unique_ptr<DeviceTimer>> tf, tb;
    for (size_t i = 0; i < calls.size(); ++i) {
      tf.push_back(dev.timer());
      tb.push_back(dev.timer());
    }
    std::vector<double> fwd, bwd;
    for (int rep = 0; rep < o.warmup + o.reps; ++rep) {
      for (size_t i = 0; i < calls.size(); ++i) {
        tf[i]->start();
        backend.attention_forward(calls[i]);
        tf[i]->stop();
        const AttnArgs b = grads[i].backward_args(calls[i]);
        tb[i]->start();
        backend.attention_backward(b);
        tb[i]->stop();
      }
      double f = 0, b = 0;
      for (size_t i = 0; i < calls.size(); ++i) f += tf[i]->ms(), b += tb[i]->ms();
      if (rep < o.warmup) continue;
      fwd.push_back(f);
      bwd.push_back(b);
    }
    const AttnArgs& c0 = calls.at(0);
    json out = {{"bench", "attention"},
                {"kind", cfg.attention.kind},
                {"T", T},
                {"source", "checkpoint"},
                {"checkpoint", o.dir},
                {"tokens_file", o.tokens_file},
                {"step", st.step},
                {"device_name", dev.name()},
                {"timer", dev.clock()},
                {"layer", o.layer >= 0 ? json(o.layer) : json("all")},
                {"layers_timed", calls.size()},
                {"B", c0.B},
                {"heads", c0.H},
                {"head_dim", c0.Dqk},
                {"reps", o.reps},
                {"warmup", o.warmup},
                {"kernel_fwd_ms", median(fwd)},
                {"kernel_bwd_ms", median(bwd)},
                {"tiles_skipped", skipped},
                {"tiles_total", total},
                {"skip_fraction", total ? double(skipped) / double(total) : 0.0}};
    if (thr_dense > 0) {
      out["threshold_tiles"] = thr;
      out["threshold_tiles_dense"] = thr_dense;
      out["threshold_skip_fraction"] = 1.0 - double(thr) / double(thr_dense);
    }
    if (zc.causal > 0) {
      out["exact_zero_fraction"] = zc.zeros / zc.causal;
    } else {
      out["exact_zero_fraction"] = nullptr;
      out["exact_zero_note"] = "not computed above T " + std::to_string(kMaxZerosT);
    }
    std::cout << out.dump() << std::endl;
  }
  return 0;
}

}  // namespace tda
