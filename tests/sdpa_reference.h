// A stand-in for cuDNN's SDPA in the tests (backend/cuda/sdpa.h states the contract): causal
// softmax attention written out in plain fp32 loops on the host, from the contract alone, not
// from our kernels, so that the glue that maps the kinds onto a vendor primitive
// (kernels/attention_vendor.cu) and the self-check that guards it (attention_impl.cu) run here on
// the emulator. Its outputs are rounded to bf16 as cuDNN's are. The wrong modes are the
// self-check's negative controls: a vendor that forgot the causal mask, or scales the scores
// by 1.25x, or refuses every shape.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "backend/cuda/sdpa.h"
#include "core/error.h"
#include "test_cuda_util.h"

namespace tda::cuda_test {

class ReferenceSdpa final : public cuda::SdpaPrimitive {
 public:
  enum class Mode { kCorrect, kNoCausalMask, kScale125, kRefuse };
  explicit ReferenceSdpa(Mode m = Mode::kCorrect) : mode_(m) {}
  std::string name() const override { return "reference SDPA (test)"; }
  std::string prepare(const cuda::SdpaShape&, bool) override {
    ++prepared;
    return mode_ == Mode::kRefuse ? "the test's primitive refuses every shape" : "";
  }

  void forward(const cuda::SdpaShape& s, const uint16_t* q, const uint16_t* k, const uint16_t* v,
               uint16_t* o, float* lse) override {
    ++forwards;
    const auto Q = get(q, s, s.ld_qk), K = get(k, s, s.ld_qk), V = get(v, s, s.ld_v);
    std::vector<float> O(V.size()), L(size_t(s.B) * s.H * s.T);
    for (int bh = 0; bh < s.B * s.H; ++bh)
      for (int i = 0; i < s.T; ++i) {
        const std::vector<double> p = probs(s, Q, K, bh, i, nullptr);
        for (int c = 0; c < s.ld_v; ++c) {
          double acc = 0;
          for (size_t j = 0; j < p.size(); ++j) acc += p[j] * V[row(s, bh, int(j), s.ld_v) + c];
          O[row(s, bh, i, s.ld_v) + c] = float(acc);
        }
        L[size_t(bh) * s.T + i] = float(lse_of(s, Q, K, bh, i));
      }
    put(o, O);
    check(cudaMemcpy(lse, L.data(), L.size() * sizeof(float), cudaMemcpyHostToDevice), "lse");
  }

  void backward(const cuda::SdpaShape& s, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                const uint16_t* o, const uint16_t* dO, const float* lse, uint16_t* dq, uint16_t* dk,
                uint16_t* dv) override {
    ++backwards;
    const auto Q = get(q, s, s.ld_qk), K = get(k, s, s.ld_qk), V = get(v, s, s.ld_v),
               O = get(o, s, s.ld_v), G = get(dO, s, s.ld_v);
    std::vector<float> L(size_t(s.B) * s.H * s.T);
    check(cudaMemcpy(L.data(), lse, L.size() * sizeof(float), cudaMemcpyDeviceToHost), "lse");
    std::vector<double> dQ(Q.size()), dK(K.size()), dV(V.size());
    const double sc = score_scale(s);
    for (int bh = 0; bh < s.B * s.H; ++bh)
      for (int i = 0; i < s.T; ++i) {
        // the weights from the forward's lse, as a flash backward recomputes them
        const double lse_i = L[size_t(bh) * s.T + i];
        const std::vector<double> p = probs(s, Q, K, bh, i, &lse_i);
        double Di = 0;
        for (int c = 0; c < s.ld_v; ++c)
          Di += double(G[row(s, bh, i, s.ld_v) + c]) * O[row(s, bh, i, s.ld_v) + c];
        for (size_t j = 0; j < p.size(); ++j) {
          double dp = 0;
          for (int c = 0; c < s.ld_v; ++c)
            dp += double(G[row(s, bh, i, s.ld_v) + c]) * V[row(s, bh, int(j), s.ld_v) + c];
          const double ds = p[j] * (dp - Di) * sc;
          for (int c = 0; c < s.ld_qk; ++c) {
            dQ[row(s, bh, i, s.ld_qk) + c] += ds * K[row(s, bh, int(j), s.ld_qk) + c];
            dK[row(s, bh, int(j), s.ld_qk) + c] += ds * Q[row(s, bh, i, s.ld_qk) + c];
          }
          for (int c = 0; c < s.ld_v; ++c)
            dV[row(s, bh, int(j), s.ld_v) + c] += p[j] * G[row(s, bh, i, s.ld_v) + c];
        }
      }
    put(dq, std::vector<float>(dQ.begin(), dQ.end()));
    put(dk, std::vector<float>(dK.begin(), dK.end()));
    put(dv, std::vector<float>(dV.begin(), dV.end()));
  }

  int prepared = 0, forwards = 0, backwards = 0;

 private:
  static size_t row(const cuda::SdpaShape& s, int bh, int t, int ld) {
    return (size_t(bh) * s.T + size_t(t)) * size_t(ld);
  }
  static void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw tda::Error(std::string("reference SDPA: ") + what);
  }
  static std::vector<float> get(const uint16_t* d, const cuda::SdpaShape& s, int ld) {
    std::vector<uint16_t> h(size_t(s.B) * s.H * s.T * size_t(ld));
    check(cudaMemcpy(h.data(), d, h.size() * 2, cudaMemcpyDeviceToHost), "download");
    std::vector<float> f(h.size());
    for (size_t i = 0; i < h.size(); ++i) f[i] = __bfloat162float(__ushort_as_bfloat16(h[i]));
    return f;
  }
  static void put(uint16_t* d, const std::vector<float>& f) {
    std::vector<uint16_t> h(f.size());
    for (size_t i = 0; i < f.size(); ++i) h[i] = __bfloat16_as_ushort(__float2bfloat16(f[i]));
    check(cudaMemcpy(d, h.data(), h.size() * 2, cudaMemcpyHostToDevice), "upload");
  }
  double score_scale(const cuda::SdpaShape& s) const {
    return mode_ == Mode::kScale125 ? 1.25 * s.scale : s.scale;
  }
  // Keys row i sees: j <= i (every key without the mask).
  int keys(const cuda::SdpaShape& s, int i) const {
    return mode_ == Mode::kNoCausalMask ? s.T : i + 1;
  }
  std::vector<double> scores(const cuda::SdpaShape& s, const std::vector<float>& Q,
                             const std::vector<float>& K, int bh, int i) const {
    std::vector<double> z(size_t(keys(s, i)));
    for (size_t j = 0; j < z.size(); ++j) {
      double d = 0;
      for (int c = 0; c < s.ld_qk; ++c)
        d += double(Q[row(s, bh, i, s.ld_qk) + c]) * K[row(s, bh, int(j), s.ld_qk) + c];
      z[j] = score_scale(s) * d;
    }
    return z;
  }
  double lse_of(const cuda::SdpaShape& s, const std::vector<float>& Q, const std::vector<float>& K,
                int bh, int i) const {
    const std::vector<double> z = scores(s, Q, K, bh, i);
    double m = -INFINITY, l = 0;
    for (double x : z) m = std::max(m, x);
    for (double x : z) l += std::exp(x - m);
    return m + std::log(l);
  }
  // Row i's weights: exp(z - lse), lse given (backward) or computed (forward).
  std::vector<double> probs(const cuda::SdpaShape& s, const std::vector<float>& Q,
                            const std::vector<float>& K, int bh, int i, const double* lse) const {
    std::vector<double> z = scores(s, Q, K, bh, i);
    const double l = lse ? *lse : lse_of(s, Q, K, bh, i);
    for (double& x : z) x = std::exp(x - l);
    return z;
  }
  Mode mode_;
};

}  // namespace tda::cuda_test
