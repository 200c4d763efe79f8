// Shared harness of the CUDA attention tests: one attention problem (any AttnMath) run forward and
// backward on CpuOps (the reference) and on the emulated CudaOps, every output collected by name.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "test_cuda_util.h"  // defines TDA_CUDA_EMU first

namespace tda::cuda_test {

struct AttnProblem {
  AttnMath math = AttnMath::kSoftmax;
  int B = 1, H = 2, T = 17, Dqk = 16, Dv = 16;
  int power = 2;
  float lambda = 0.f;
  float scale = 0.f;  // 0: 1/sqrt(Dqk)
  bool bisect = false, no_skip = false, drop = false;
  float alpha = 1.5f;        // entmax
  int q_start = 0;           // forward only (run_attention then skips the backward)
  bool diff_layout = false;  // q2 = q + T*Dqk inside one (B, 2H, T, Dqk) buffer (the Diff layout)
  bool counts = true;        // survivors and tile counters requested (forward)
  bool backward = true;      // run the backward after the forward (q_start 0 only)
  int fwd_block_rows = 0;    // AttnArgs::fwd_block_rows
  int fwd_block_keys = 0;    // AttnArgs::fwd_block_keys
  // AttnArgs::atomic_dq; the gradient buffers then start as NaN, so that any element the
  // backward does not set (before adding into it) shows
  bool atomic_dq = false;
  int bwd_stages = 0;  // AttnArgs::bwd_stages
  std::vector<float> q, k, v, g, q2, k2, tau;
  std::vector<float> q_scale;  // AttnArgs::q_scale when not empty, heads q_scale_h_stride apart
  int q_scale_h_stride = 0;

  size_t nqk() const { return size_t(B) * H * T * Dqk * (diff_layout ? 2 : 1); }
  size_t nv() const { return size_t(B) * H * T * Dv; }
  size_t rows() const { return size_t(B) * H * T; }
  bool two() const { return attn_two_views(math); }
  bool thresholded() const {
    return math == AttnMath::kThreshold || math == AttnMath::kDiffThreshold;
  }

  // Random inputs: q, k in [-a, a], v and dout in [-1, 1], tau_i in [-0.2, 0.4].
  void fill(uint32_t seed, float amp = 2.f) {
    q = rnd(nqk(), seed + 1, -amp, amp);
    k = rnd(nqk(), seed + 2, -amp, amp);
    v = rnd(nv(), seed + 3);
    g = rnd(nv(), seed + 4);
    if (two() && !diff_layout) {
      q2 = rnd(nqk(), seed + 5, -amp, amp);
      k2 = rnd(nqk(), seed + 6, -amp, amp);
    }
    tau = thresholded() ? rnd(size_t(T), seed + 7, -0.2f, 0.4f) : std::vector<float>();
  }
};

using Outputs = std::map<std::string, std::vector<float>>;

// x rounded to bf16 and back (what the tensor-core kernels see).
inline std::vector<float> bf16_round(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = __bfloat162float(__float2bfloat16(x[i]));
  return y;
}

inline AttnProblem rounded(const AttnProblem& p) {
  AttnProblem r = p;
  for (auto* x : {&r.q, &r.k, &r.v, &r.g, &r.q2, &r.k2}) *x = bf16_round(*x);
  return r;
}

// Forward then backward on `ops`; `skipped`/`total` receive the tile counters, `threshold` the
// score tiles of the CUDA entmax threshold pre-pass.
inline Outputs run_attention(Ops& ops, const AttnProblem& p, long long* skipped = nullptr,
                             long long* total = nullptr, long long* threshold = nullptr) {
  const size_t nqk = p.nqk(), nv = p.nv(), rows = p.rows();
  const int nst = attn_n_stats(p.math), ns = p.two() ? 3 : 1;
  DeviceBuffer<float> q(p.q), k(p.k), v(p.v), g(p.g), out(nv), out2(nv), st(rows * 2),
      surv(rows * ns), dq(nqk), dk(nqk), dv(nv), dtau(rows), dlam(rows);
  DeviceBuffer<float> q2(p.q2.empty() ? std::vector<float>(1) : p.q2),
      k2(p.k2.empty() ? std::vector<float>(1) : p.k2),
      tau(p.tau.empty() ? std::vector<float>(1) : p.tau),
      qscale(p.q_scale.empty() ? std::vector<float>(1) : p.q_scale);
  DeviceBuffer<float> dq2(p.diff_layout ? 1 : nqk), dk2(p.diff_layout ? 1 : nqk);
  DeviceBuffer<long long> cnt(std::vector<long long>{0, 0, 0});
  DeviceBuffer<float> lambda(std::vector<float>{p.lambda});
  AttnArgs a;
  a.math = p.math;
  a.B = p.B;
  a.H = p.H;
  a.T = p.T;
  a.Dqk = p.Dqk;
  a.Dv = p.Dv;
  a.scale = p.scale > 0.f ? p.scale : 1.f / std::sqrt(float(p.Dqk));
  a.power = p.power;
  a.lambda = lambda.get();
  a.entmax_alpha = p.alpha;
  a.entmax_bisect = p.bisect;
  a.no_skip = p.no_skip;
  a.q = q.get();
  a.k = k.get();
  a.v = v.get();
  if (p.two()) {
    if (p.diff_layout) {
      a.qk_bh_stride = 2 * size_t(p.T) * p.Dqk;
      a.q2 = a.q + size_t(p.T) * p.Dqk;
      a.k2 = a.k + size_t(p.T) * p.Dqk;
    } else {
      a.q2 = q2.get();
      a.k2 = k2.get();
    }
  }
  if (!p.tau.empty()) a.tau = tau.get();
  if (!p.q_scale.empty()) {
    a.q_scale = qscale.get();
    a.q_scale_h_stride = p.q_scale_h_stride;
  }
  a.out = out.get();
  a.out2 = p.math == AttnMath::kDiffSoftmax ? out2.get() : nullptr;
  a.stats = st.get();
  if (p.counts) {
    a.survivors = surv.get();
    a.tiles_skipped = cnt.get();
    a.tiles_total = cnt.get() + 1;
    a.entmax_threshold_tiles = cnt.get() + 2;
  }
  a.fwd_block_rows = p.fwd_block_rows;
  a.fwd_block_keys = p.fwd_block_keys;
  a.atomic_dq = p.atomic_dq;
  a.bwd_stages = p.bwd_stages;
  if (p.atomic_dq)
    for (auto* d : {&dq, &dq2, &dtau, &dlam}) {
      const std::vector<float> nan(d->size(), NAN);
      cudaMemcpy(d->get(), nan.data(), nan.size() * sizeof(float), cudaMemcpyHostToDevice);
    }
  a.dout = g.get();
  a.dq = dq.get();
  a.dk = dk.get();
  a.dv = dv.get();
  if (p.two()) {
    a.dq2 = p.diff_layout ? a.dq + size_t(p.T) * p.Dqk : dq2.get();
    a.dk2 = p.diff_layout ? a.dk + size_t(p.T) * p.Dqk : dk2.get();
  }
  a.drow_tau = dtau.get();
  a.drow_lambda = dlam.get();
  a.q_start = p.q_start;
  ops.attention_forward(a);
  if (p.q_start == 0 && !p.drop && p.backward) {
    ops.attention_backward(a);
  } else if (p.q_start == 0 &&
             p.drop) {  // the negative control: each backend's entry point that drops it
    if (dynamic_cast<CudaOps*>(&ops)) {
      DeviceBuffer<float> scratch(std::max<size_t>(cuda::attention_backward_scratch(a), 1));
      DeviceBuffer<uint16_t> operands(
          std::max<size_t>(cuda::attention_operands_scratch(a, true), 1));
      cuda::attention_backward(a, scratch.get(), operands.get(), /*drop_term=*/true);
    } else {
      cpu_attention_backward(a, /*drop_term=*/true);
    }
  }
  Outputs o;
  o["out"] = out.to_host();
  if (a.out2) o["out2"] = out2.to_host();
  if (nst > 0) {
    auto s = st.to_host();
    s.resize(rows * nst);
    o["stats"] = s;
  }
  if (p.counts) o["survivors"] = surv.to_host();
  o["dq"] = dq.to_host();  // the diff layout holds dq and dq2 in one buffer
  o["dk"] = dk.to_host();
  o["dv"] = dv.to_host();
  if (p.two() && !p.diff_layout) {
    o["dq2"] = dq2.to_host();
    o["dk2"] = dk2.to_host();
  }
  o["drow_tau"] = dtau.to_host();
  o["drow_lambda"] = dlam.to_host();
  const auto c = cnt.to_host();
  if (skipped) *skipped = c[0];
  if (total) *total = c[1];
  if (threshold) *threshold = c[2];
  return o;
}

}  // namespace tda::cuda_test
