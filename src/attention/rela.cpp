// `rela`: rectified linear attention (Zhang, Titov, Sennrich 2021; attention-variants.md §6).
//   a_ij = max(s_ij, 0), s_ij = q_i.k_j / sqrt(d) (j <= i);  o_i^h = sum_j a_ij v_j
//   u_i = concat_h o_i^h (C);  r_i = sqrt(mean(u_i^2) + eps)
//   rela_norm "gated_rmsnorm" (default, the official ReLA-g):  y = gamma * u / r * sigmoid(w * u)
//             "rmsnorm":                                      y = gamma * u / r
//             "layernorm" (no bias, ASSUMED):   y = gamma * (u - mu) / sqrt(var + eps)
// The norm spans all heads of a token. Parameters: gamma (C, init 1), w (C, gated only,
// U(+-sqrt(3/C)) = TF Glorot for a vector, ASSUMED). eps = rela_eps (1e-6, ASSUMED).
// Gated backward (sg = sigmoid(w u), tot = sum_e dy_e gamma_e u_e sg_e):
//   du_c = dy_c gamma_c [sg_c / r + (u_c / r) sg_c (1 - sg_c) w_c] - u_c tot / (C r^3)
//   dgamma_c += dy_c u_c sg_c / r;  dw_c += dy_c gamma_c (u_c / r) sg_c (1 - sg_c) u_c
// A token whose heads are all switched off has u = 0, hence y = 0.
#include <cmath>

#include "attention/common.h"
#include "attention/registry.h"
#include "core/error.h"

namespace tda {

namespace {

using namespace attn_util;

class RelaAttention final : public AttentionVariant {
 public:
  enum class Norm { kGated, kRms, kLayer };
  RelaAttention(const ModelConfig& m, const AttentionConfig& a)
      : C_(m.d_model), H_(m.n_head), D_(m.head_dim()), eps_(float(a.rela_eps)) {
    if (a.rela_norm == "gated_rmsnorm")
      norm_ = Norm::kGated;
    else if (a.rela_norm == "rmsnorm")
      norm_ = Norm::kRms;
    else if (a.rela_norm == "layernorm")
      norm_ = Norm::kLayer;
    else
      throw Error(
          "config: attention.rela_norm must be \"gated_rmsnorm\", \"rmsnorm\" or "
          "\"layernorm\", got \"" +
          a.rela_norm + "\"");
  }
  std::string kind() const override { return "rela"; }
  int proj_width() const override { return 3 * C_; }
  std::vector<ParamSpec> extra_params(int) const override {
    std::vector<ParamSpec> p{{"norm_gamma", {C_}, ParamSpec::Init::kOnes, 0.f, false}};
    if (norm_ == Norm::kGated)
      p.push_back({"norm_gate", {C_}, ParamSpec::Init::kUniform, std::sqrt(3.f / C_), false});
    return p;
  }
  size_t act_floats(int B, int T) const override {
    return 5 * size_t(B) * T * C_ + 2 * size_t(B) * T;
  }
  size_t scratch_floats(int B, int T) const override { return 5 * size_t(B) * T * C_; }

  void forward(const AttnContext& c, const float* proj, float* y, float* act,
               const std::vector<float*>& extra) override {
    Buf s = buffers(act, c.B, c.T);
    const int W = proj_width();
    c.ops.rope_forward(s.q, proj, W, 0, c.cos, c.sin, c.B, c.T, H_, D_, c.pos0);
    c.ops.rope_forward(s.k, proj, W, C_, c.cos, c.sin, c.B, c.T, H_, D_, c.pos0);
    c.ops.split_heads(s.v, proj, W, 2 * C_, c.B, c.T, H_, D_);
    AttnArgs a = args(c, s);
    c.ops.attention_forward(a);
    c.ops.merge_heads(s.u, s.o, C_, 0, c.B, c.T, H_, D_);
    const float* gamma = extra[0];
    const float* w = norm_ == Norm::kGated ? extra[1] : nullptr;
    const int N = c.B * c.T;
#pragma omp parallel for schedule(static)
    for (int t = 0; t < N; ++t) {
      const float* u = s.u + size_t(t) * C_;
      float* yt = y + size_t(t) * C_;
      float mu = 0.f, ss = 0.f;
      if (norm_ == Norm::kLayer) {
        for (int ch = 0; ch < C_; ++ch) mu += u[ch];
        mu /= C_;
      }
      for (int ch = 0; ch < C_; ++ch) ss += (u[ch] - mu) * (u[ch] - mu);
      const float r = std::sqrt(ss / C_ + eps_);  // r = sqrt(mean((u - mu)^2) + eps)
      for (int ch = 0; ch < C_; ++ch) {
        const float gate = w ? sigmoid(w[ch] * u[ch]) : 1.f;
        yt[ch] = gamma[ch] * (u[ch] - mu) / r * gate;
      }
      s.r[t] = r;
      s.mu[t] = mu;
    }
  }

  void backward(const AttnContext& c, const float*, const float* dy, float* dproj, float* act,
                const std::vector<float*>& extra, const std::vector<float*>& dextra,
                float* scratch) override {
    Buf s = buffers(act, c.B, c.T);
    const size_t n = size_t(c.B) * c.T * C_;
    float *du = scratch, *g = du + n, *dq = g + n, *dk = dq + n, *dv = dk + n;
    const float* gamma = extra[0];
    const float* w = norm_ == Norm::kGated ? extra[1] : nullptr;
    const int N = c.B * c.T, W = proj_width();
    // pass 1, per token: du
#pragma omp parallel for schedule(static)
    for (int t = 0; t < N; ++t) {
      const float* u = s.u + size_t(t) * C_;
      const float* dyt = dy + size_t(t) * C_;
      float* dut = du + size_t(t) * C_;
      const float r = s.r[t], mu = s.mu[t];
      if (norm_ == Norm::kLayer) {
        // xh = (u - mu)/r, h = gamma dy:  du = (h - mean(h) - xh mean(h xh)) / r
        float mh = 0.f, mhx = 0.f;
        for (int ch = 0; ch < C_; ++ch) {
          const float h = gamma[ch] * dyt[ch];
          mh += h;
          mhx += h * (u[ch] - mu) / r;
        }
        mh /= C_;
        mhx /= C_;
        for (int ch = 0; ch < C_; ++ch)
          dut[ch] = (gamma[ch] * dyt[ch] - mh - (u[ch] - mu) / r * mhx) / r;
        continue;
      }
      float tot = 0.f;  // sum_e dy_e gamma_e u_e sg_e
      for (int ch = 0; ch < C_; ++ch)
        tot += dyt[ch] * gamma[ch] * u[ch] * (w ? sigmoid(w[ch] * u[ch]) : 1.f);
      const float k = tot / (C_ * r * r * r);
      for (int ch = 0; ch < C_; ++ch) {
        const float sg = w ? sigmoid(w[ch] * u[ch]) : 1.f;
        const float dgate = w ? (u[ch] / r) * sg * (1.f - sg) * w[ch] : 0.f;
        dut[ch] = dyt[ch] * gamma[ch] * (sg / r + dgate) - u[ch] * k;
      }
    }
    // pass 2, per channel (serial over tokens: fixed order): dgamma, dw
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < C_; ++ch) {
      double dg = 0, dw = 0;
      for (int t = 0; t < N; ++t) {
        const size_t idx = size_t(t) * C_ + ch;
        const float u = s.u[idx], r = s.r[t], sg = w ? sigmoid(w[ch] * u) : 1.f;
        dg += double(dy[idx]) * (u - s.mu[t]) * sg / r;
        if (w) dw += double(dy[idx]) * gamma[ch] * (u / r) * sg * (1.f - sg) * u;
      }
      dextra[0][ch] += float(dg);
      if (w) dextra[1][ch] += float(dw);
    }
    c.ops.split_heads(g, du, C_, 0, c.B, c.T, H_, D_);
    AttnArgs a = args(c, s);
    a.dout = g;
    a.dq = dq;
    a.dk = dk;
    a.dv = dv;
    c.ops.attention_backward(a);
    c.ops.rope_backward(dproj, dq, W, 0, c.cos, c.sin, c.B, c.T, H_, D_, c.pos0);
    c.ops.rope_backward(dproj, dk, W, C_, c.cos, c.sin, c.B, c.T, H_, D_, c.pos0);
    c.ops.merge_heads(dproj, dv, W, 2 * C_, c.B, c.T, H_, D_);
  }

 private:
  struct Buf {
    float *q, *k, *v, *o, *u, *r, *mu;
  };
  Buf buffers(float* act, int B, int T) const {
    const size_t n = size_t(B) * T * C_, nt = size_t(B) * T;
    float* p = act + 5 * n;
    return Buf{act, act + n, act + 2 * n, act + 3 * n, act + 4 * n, p, p + nt};
  }
  AttnArgs args(const AttnContext& c, const Buf& s) const {
    AttnArgs a = make_args(AttnMath::kRelu, c, H_, D_, D_, 1.0f / std::sqrt(float(D_)));
    a.q = s.q;
    a.k = s.k;
    a.v = s.v;
    a.out = s.o;
    a.power = 1;
    return a;
  }
  int C_, H_, D_;
  float eps_;
  Norm norm_ = Norm::kGated;
};

}  // namespace

TDA_REGISTER_ATTENTION("rela", RelaAttention);

}  // namespace tda
