// Causal alpha-entmax attention (Peters, Niculae, Martins 2019), one query row at a time.
// The threshold tau_i is a root over the whole visible row, so the row is materialised in an
// O(T) per-thread scratch (never T x T). z_ij = scale q_i.k_j for j <= i, am1 = alpha - 1.
//   forward:  p_ij = max(am1 z_ij - tau_i, 0)^(1/am1) / norm_i;  o_i = sum_j p_ij v_j (support)
//             tau_i: exact sort-based solver (default, alpha 1.5 only) or bisection
//             (entmax_bisect, any alpha in (1, 2]);
//             saved per row: stats = (tau_i, norm_i); norm = 1 for the exact solver.
//   backward: e_ij = g_i.v_j;  w_ij = p_ij^(2 - alpha) on the support (1.5: sqrt p);
//             c_i = sum_j w_ij e_ij / sum_j w_ij;
//             dz_ij = w_ij (e_ij - c_i);  dq_i = scale sum_j dz_ij k_j;
//             dk_j = scale sum_i dz_ij q_i;  dv_j = sum_i p_ij g_i
#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "attention/policies.h"
#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace tda {

namespace {

inline float dot(const float* a, const float* b, int n) {
  float s = 0.f;
  for (int d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

// Exact 1.5-entmax threshold of z[0..n) in the z/2 frame (the entmax package's entmax15):
//   u = (z - max z)/2 sorted descending; M_k, Q_k = running means of u, u^2 over the top k;
//   delta_k = (1 - k (Q_k - M_k^2)) / k;  tau_k = M_k - sqrt(max(delta_k, 0));
//   k* = #{k : tau_k <= u_(k)};  tau = max z / 2 + tau_{k*}
float entmax15_tau_sort(const float* z, int n, std::vector<float>& buf) {
  float zmax = -INFINITY;
  for (int j = 0; j < n; ++j) zmax = std::max(zmax, z[j]);
  buf.resize(size_t(n));
  for (int j = 0; j < n; ++j) buf[size_t(j)] = 0.5f * (z[j] - zmax);
  std::sort(buf.begin(), buf.end(), std::greater<float>());
  double sum = 0, sum2 = 0, tau_star = 0;
  int support = 0;
  for (int k = 1; k <= n; ++k) {
    const double u = buf[size_t(k - 1)];
    sum += u;
    sum2 += u * u;
    const double M = sum / k, Q = sum2 / k;
    const double delta = (1.0 - k * (Q - M * M)) / k;
    const double tau = M - std::sqrt(std::max(delta, 0.0));
    if (tau <= u) {  // the condition holds for a prefix of k: the last one is k*
      support = k;
      tau_star = tau;
    }
  }
  (void)support;
  return 0.5f * zmax + float(tau_star);
}

struct RowSolve {
  float tau, norm;
};

RowSolve solve_row(const AttnArgs& a, const float* z, int n, std::vector<float>& buf) {
  if (a.entmax_bisect) {
    float norm = 1.f;
    const float tau = attn::Entmax::bisect(z, n, a.entmax_iters, a.entmax_alpha - 1.f, &norm);
    return {tau, norm};
  }
  return {entmax15_tau_sort(z, n, buf), 1.f};
}

// z_j = scale q_i.k_j for j <= i
void row_scores(float* z, const float* qi, const float* k, int i, int D, float scale) {
  for (int j = 0; j <= i; ++j) z[j] = scale * dot(qi, k + size_t(j) * D, D);
}

// alpha in (1, 2]; the sort solver's closed form is 1.5-entmax's.
void check_alpha(const AttnArgs& a) {
  TDA_CHECK(a.entmax_alpha > 1.f && a.entmax_alpha <= 2.f,
            "attention (entmax): alpha must be in (1, 2], got " + std::to_string(a.entmax_alpha));
  TDA_CHECK(a.entmax_bisect || a.entmax_alpha == 1.5f,
            "attention (entmax): the exact (sort) solver is for alpha 1.5 only; alpha " +
                std::to_string(a.entmax_alpha) + " needs the bisection solver");
}

}  // namespace

void cpu_entmax_forward(const AttnArgs& a) {
  check_alpha(a);
  const int T = a.T, Dk = a.Dqk, Dv = a.Dv;
  const float am1 = a.entmax_alpha - 1.f;
  const size_t sqk = a.qk_bh_stride ? a.qk_bh_stride : size_t(T) * Dk;
  // Tile counters in the tiled kernels' convention (64 x 64 query block x key tile pairs,
  // causal, blocks wholly below q_start not counted; a pair is dead when no p_ij > 0): each row
  // marks its live key tiles, reduced per block below.
  constexpr int kTile = 64;
  const bool count = a.tiles_total || a.tiles_skipped;
  const int nb = (T + kTile - 1) / kTile;
  std::vector<unsigned char> live(count ? size_t(a.B) * a.H * T * nb : 0, 0);
#pragma omp parallel
  {
    std::vector<float> z(static_cast<size_t>(T)), buf;
#pragma omp for collapse(2) schedule(dynamic)
    for (int bh = 0; bh < a.B * a.H; ++bh)
      for (int i = 0; i < T; ++i) {
        const float* q = a.q + bh * sqk;
        const float* k = a.k + bh * sqk;
        const float* v = a.v + size_t(bh) * T * Dv;
        const size_t row = size_t(bh) * T + i;
        float* o = a.out + row * Dv;
        std::fill(o, o + Dv, 0.f);
        if (i < a.q_start) continue;  // KV-cache decoding: row not computed (output 0)
        row_scores(z.data(), q + size_t(i) * Dk, k, i, Dk, a.scale);
        const RowSolve rs = solve_row(a, z.data(), i + 1, buf);
        int surv = 0;
        for (int j = 0; j <= i; ++j) {
          const float p = attn::Entmax::prob(z[size_t(j)], rs.tau, rs.norm, am1);
          if (p == 0.f) continue;  // structural zero: no value product
          ++surv;
          if (count) live[row * nb + size_t(j / kTile)] = 1;
          const float* vj = v + size_t(j) * Dv;
          for (int d = 0; d < Dv; ++d) o[d] += p * vj[d];
        }
        a.stats[row * 2] = rs.tau;
        a.stats[row * 2 + 1] = rs.norm;
        if (a.survivors) a.survivors[row] = float(surv);
      }
  }
  if (!count) return;
  long long total = 0, skipped = 0;
  for (int bh = 0; bh < a.B * a.H; ++bh)
    for (int bi = a.q_start / kTile; bi < nb; ++bi)
      for (int bj = 0; bj <= bi; ++bj) {
        bool any = false;
        for (int i = std::max(bi * kTile, a.q_start); i < std::min(T, (bi + 1) * kTile); ++i)
          any = any || live[(size_t(bh) * T + i) * nb + size_t(bj)];
        ++total;
        skipped += !any && !a.no_skip;
      }
  if (a.tiles_total) *a.tiles_total += total;
  if (a.tiles_skipped) *a.tiles_skipped += skipped;
}

void cpu_entmax_backward(const AttnArgs& a, bool drop_term) {
  check_alpha(a);
  const int T = a.T, Dk = a.Dqk, Dv = a.Dv;
  const float am1 = a.entmax_alpha - 1.f;
  const size_t sqk = a.qk_bh_stride ? a.qk_bh_stride : size_t(T) * Dk;
#pragma omp parallel
  {
    // z: scores, then p; e: g_i.v_j; w: p^(2 - alpha), each computed once per support entry
    std::vector<float> z(static_cast<size_t>(T)), e(static_cast<size_t>(T)),
        w(static_cast<size_t>(T));
    // One (b, h) per thread: dk and dv are owned by it (fixed summation order).
#pragma omp for schedule(dynamic)
    for (int bh = 0; bh < a.B * a.H; ++bh) {
      const float* q = a.q + bh * sqk;
      const float* k = a.k + bh * sqk;
      const float* v = a.v + size_t(bh) * T * Dv;
      const float* go = a.dout + size_t(bh) * T * Dv;
      float* dq = a.dq + bh * sqk;
      float* dk = a.dk + bh * sqk;
      float* dv = a.dv + size_t(bh) * T * Dv;
      std::fill(dq, dq + size_t(T) * Dk, 0.f);
      std::fill(dk, dk + size_t(T) * Dk, 0.f);
      std::fill(dv, dv + size_t(T) * Dv, 0.f);
      for (int i = 0; i < T; ++i) {
        const size_t row = size_t(bh) * T + i;
        const float tau = a.stats[row * 2], norm = a.stats[row * 2 + 1];
        const float* qi = q + size_t(i) * Dk;
        const float* gi = go + size_t(i) * Dv;
        row_scores(z.data(), qi, k, i, Dk, a.scale);
        // c_i = sum_j w_ij e_ij / sum_j w_ij, w = p^(2 - alpha), over the support only
        float G = 0.f, Ge = 0.f;
        for (int j = 0; j <= i; ++j) {
          const float p = attn::Entmax::prob(z[size_t(j)], tau, norm, am1);
          z[size_t(j)] = p;  // z now holds p
          if (p == 0.f) continue;
          e[size_t(j)] = dot(gi, v + size_t(j) * Dv, Dv);
          w[size_t(j)] = attn::Entmax::grad_weight(p, am1);
          G += w[size_t(j)];
          Ge += w[size_t(j)] * e[size_t(j)];
        }
        const float c = drop_term ? 0.f : Ge / G;  // G > 0: the support is never empty
        float* dqi = dq + size_t(i) * Dk;
        for (int j = 0; j <= i; ++j) {
          const float p = z[size_t(j)];
          if (p == 0.f) continue;  // off the support w = 0: dz = 0 and no dv term
          const float dz = w[size_t(j)] * (e[size_t(j)] - c) * a.scale;
          const float* kj = k + size_t(j) * Dk;
          float* dkj = dk + size_t(j) * Dk;
          for (int d = 0; d < Dk; ++d) {
            dqi[d] += dz * kj[d];
            dkj[d] += dz * qi[d];
          }
          float* dvj = dv + size_t(j) * Dv;
          for (int d = 0; d < Dv; ++d) dvj[d] += p * gi[d];
        }
      }
    }
  }
}

}  // namespace tda
