// Causal softmax attention, streamed over key tiles (FlashAttention-2 schedule on the CPU).
// No T x T buffer: the forward keeps a running max m_i and sum l_i per row and saves only
// LSE_i = m_i + log l_i; the backward recomputes a_ij = exp(s_ij - LSE_i).
//   s_ij = scale q_i.k_j (j <= i);  o_i = sum_j a_ij v_j
//   D_i = dout_i.o_i;  ds_ij = a_ij (dout_i.v_j - D_i)
//   dq_i = scale sum_j ds_ij k_j;  dk_j = scale sum_i ds_ij q_i;  dv_j = sum_i a_ij dout_i
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace tda {

namespace {
constexpr int kTile = 64;

inline float dot(const float* a, const float* b, int n) {
  float s = 0.f;
  for (int d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

void softmax_forward(const AttnArgs& a) {
  const int T = a.T, Dk = a.Dqk, Dv = a.Dv;
#pragma omp parallel
  {
    std::vector<float> s(kTile), acc(size_t(kTile) * Dv);
    std::vector<float> m(kTile), l(kTile);
#pragma omp for collapse(2) schedule(dynamic)
    for (int bh = 0; bh < a.B * a.H; ++bh)
      for (int i0 = 0; i0 < T; i0 += kTile) {
        const float* q = a.q + size_t(bh) * T * Dk;
        const float* k = a.k + size_t(bh) * T * Dk;
        const float* v = a.v + size_t(bh) * T * Dv;
        float* o = a.out + size_t(bh) * T * Dv;
        float* lse = a.stats + size_t(bh) * T;
        const int i1 = std::min(T, i0 + kTile);
        std::fill(m.begin(), m.end(), -INFINITY);
        std::fill(l.begin(), l.end(), 0.f);
        std::fill(acc.begin(), acc.end(), 0.f);
        for (int j0 = 0; j0 < i1; j0 += kTile) {
          const int j1 = std::min(i1, j0 + kTile);
          for (int i = i0; i < i1; ++i) {
            const int jend = std::min(j1, i + 1);
            if (jend <= j0) continue;
            const int r = i - i0;
            float tile_max = -INFINITY;
            for (int j = j0; j < jend; ++j) {
              s[j - j0] = a.scale * dot(q + size_t(i) * Dk, k + size_t(j) * Dk, Dk);
              tile_max = std::max(tile_max, s[j - j0]);
            }
            const float m_new = std::max(m[r], tile_max);
            const float corr = std::exp(m[r] - m_new);  // exp(-inf) = 0 on the first tile
            float* ar = acc.data() + size_t(r) * Dv;
            for (int d = 0; d < Dv; ++d) ar[d] *= corr;
            float lsum = l[r] * corr;
            for (int j = j0; j < jend; ++j) {
              const float p = std::exp(s[j - j0] - m_new);
              lsum += p;
              const float* vj = v + size_t(j) * Dv;
              for (int d = 0; d < Dv; ++d) ar[d] += p * vj[d];
            }
            l[r] = lsum;
            m[r] = m_new;
          }
        }
        for (int i = i0; i < i1; ++i) {
          const int r = i - i0;
          const float inv = 1.0f / l[r];
          for (int d = 0; d < Dv; ++d) o[size_t(i) * Dv + d] = acc[size_t(r) * Dv + d] * inv;
          lse[i] = m[r] + std::log(l[r]);
        }
      }
  }
}

void softmax_backward(const AttnArgs& a) {
  const int T = a.T, Dk = a.Dqk, Dv = a.Dv;
#pragma omp parallel
  {
    std::vector<float> Drow(static_cast<size_t>(T));
#pragma omp for schedule(dynamic)
    for (int bh = 0; bh < a.B * a.H; ++bh) {
      const float* q = a.q + size_t(bh) * T * Dk;
      const float* k = a.k + size_t(bh) * T * Dk;
      const float* v = a.v + size_t(bh) * T * Dv;
      const float* o = a.out + size_t(bh) * T * Dv;
      const float* go = a.dout + size_t(bh) * T * Dv;
      const float* lse = a.stats + size_t(bh) * T;
      float* dq = a.dq + size_t(bh) * T * Dk;
      float* dk = a.dk + size_t(bh) * T * Dk;
      float* dv = a.dv + size_t(bh) * T * Dv;
      std::fill(dq, dq + size_t(T) * Dk, 0.f);
      std::fill(dk, dk + size_t(T) * Dk, 0.f);
      std::fill(dv, dv + size_t(T) * Dv, 0.f);
      for (int i = 0; i < T; ++i) Drow[size_t(i)] = dot(go + size_t(i) * Dv, o + size_t(i) * Dv, Dv);
      // Key tile outer, query rows inner: dk/dv of a tile stay hot in cache.
      for (int j0 = 0; j0 < T; j0 += kTile) {
        const int j1 = std::min(T, j0 + kTile);
        for (int i = j0; i < T; ++i) {
          const float* qi = q + size_t(i) * Dk;
          const float* gi = go + size_t(i) * Dv;
          float* dqi = dq + size_t(i) * Dk;
          const int jend = std::min(j1, i + 1);
          for (int j = j0; j < jend; ++j) {
            const float p = std::exp(a.scale * dot(qi, k + size_t(j) * Dk, Dk) - lse[i]);
            const float dp = dot(gi, v + size_t(j) * Dv, Dv);
            const float ds = p * (dp - Drow[size_t(i)]) * a.scale;
            float* dvj = dv + size_t(j) * Dv;
            for (int d = 0; d < Dv; ++d) dvj[d] += p * gi[d];
            const float* kj = k + size_t(j) * Dk;
            float* dkj = dk + size_t(j) * Dk;
            for (int d = 0; d < Dk; ++d) {
              dqi[d] += ds * kj[d];
              dkj[d] += ds * qi[d];
            }
          }
        }
      }
    }
  }
}
}  // namespace

void CpuOps::attention_forward(const AttnArgs& a) {
  switch (a.math) {
    case AttnMath::kSoftmax:
      return softmax_forward(a);
  }
  throw Error("cpu backend: unsupported attention math");
}

void CpuOps::attention_backward(const AttnArgs& a) {
  switch (a.math) {
    case AttnMath::kSoftmax:
      return softmax_backward(a);
  }
  throw Error("cpu backend: unsupported attention math");
}

}  // namespace tda
