// Harness for the attention tests: one variant on the CPU backend, driven exactly as the model
// drives it (proj -> y forward, dy -> dproj backward), with its extra parameters, RoPE tables
// and buffers sized by the variant itself.
#pragma once
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "attention/variant.h"
#include "backend/cpu/cpu_ops.h"
#include "core/config.h"
#include "core/rng.h"

namespace tda {

// Random unit vectors: n rows of d, N(0, 1) entries L2-normalised.
inline std::vector<float> unit_vectors(size_t n, int d, Rng& rng) {
  std::vector<float> x(n * d), norm(n);
  for (auto& e : x) e = rng.normal();
  CpuOps().l2norm_forward(x.data(), norm.data(), n, d);
  return x;
}

// Kernel arguments for batch 1, H heads of T rows of d (q, k, and q2, k2 for two views) in the
// survivor theorems' setting: score scale 1 (cosines of unit vectors), p = 2, lambda = 0.5.
inline AttnArgs theorem_args(AttnMath m, int H, int T, int d, const float* q, const float* k,
                             const float* q2 = nullptr, const float* k2 = nullptr) {
  AttnArgs a;
  a.math = m;
  a.B = 1;
  a.H = H;
  a.T = T;
  a.Dqk = a.Dv = d;
  a.scale = 1.f;
  a.q = q;
  a.k = k;
  a.q2 = q2;
  a.k2 = k2;
  a.power = 2;
  static const float kLambda = 0.5f;  // host memory: these args go to CpuOps
  a.lambda = &kLambda;
  return a;
}

inline Config attn_test_config(const std::string& kind, int d_model = 128, int n_head = 2,
                               const json& attn_overrides = json::object()) {
  json j = config_defaults();
  j["model"]["n_layer"] = 4;
  j["model"]["d_model"] = d_model;
  j["model"]["n_head"] = n_head;
  j["model"]["seq_len"] = 256;
  j["train"]["micro_batch"] = 1;
  j["train"]["total_batch_tokens"] = 256;
  j["attention"]["kind"] = kind;
  for (auto it = attn_overrides.begin(); it != attn_overrides.end(); ++it)
    j["attention"][it.key()] = it.value();
  return config_from_json(j, "test");
}

struct AttnHarness {
  CpuOps ops;
  Config cfg;
  std::unique_ptr<AttentionVariant> var;
  int B, T, layer;
  long step = 0;
  std::vector<ParamSpec> specs;
  std::vector<std::vector<float>> params, dparams;
  std::vector<float> cos, sin, proj, y, act, scratch, dproj, R;

  AttnHarness(const Config& c, int B_, int T_, uint64_t seed, int layer_ = 1)
      : cfg(c), B(B_), T(T_), layer(layer_) {
    var = make_attention(cfg.model, cfg.attention);
    const int C = cfg.model.d_model, D = cfg.model.head_dim();
    Rng rng(seed);
    // RoPE tables (T, D/2) for theta = 10000; any consistent table serves the tests.
    cos.resize(size_t(T) * D / 2);
    sin.resize(cos.size());
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < D / 2; ++i) {
        const double ang = t * std::pow(10000.0, -2.0 * i / D);
        cos[size_t(t) * D / 2 + i] = float(std::cos(ang));
        sin[size_t(t) * D / 2 + i] = float(std::sin(ang));
      }
    specs = var->extra_params(layer);
    for (const auto& s : specs) {
      size_t n = 1;
      for (auto d : s.shape) n *= size_t(d);
      std::vector<float> p(n);
      init_param(p.data(), n, s.init, s.a, rng);  // the model's initialiser
      params.push_back(p);
      dparams.emplace_back(n, 0.f);
    }
    const size_t W = size_t(var->proj_width());
    proj.resize(size_t(B) * T * W);
    for (auto& x : proj) x = rng.normal();
    y.resize(size_t(B) * T * C);
    R.resize(y.size());
    for (auto& x : R) x = rng.normal();
    act.resize(var->act_floats(B, T));
    scratch.resize(var->scratch_floats(B, T));
    dproj.resize(proj.size());
  }
  AttnContext ctx() {
    return AttnContext{ops, B, T, layer, cfg.model.n_layer, step, cos.data(), sin.data(), 0};
  }
  std::vector<float*> ptrs(std::vector<std::vector<float>>& v) {
    std::vector<float*> p;
    for (auto& x : v) p.push_back(x.data());
    return p;
  }
  void forward() { var->forward(ctx(), proj.data(), y.data(), act.data(), ptrs(params)); }
  // L = sum y * R, accumulated in double
  double loss() {
    forward();
    double L = 0;
    for (size_t i = 0; i < y.size(); ++i) L += double(y[i]) * R[i];
    return L;
  }
  // dL/dproj into dproj, dL/dparams into dparams (zeroed first).
  void grads() {
    forward();
    for (auto& d : dparams) std::fill(d.begin(), d.end(), 0.f);
    var->backward(ctx(), proj.data(), R.data(), dproj.data(), act.data(), ptrs(params),
                  ptrs(dparams), scratch.data());
  }
};

}  // namespace tda
