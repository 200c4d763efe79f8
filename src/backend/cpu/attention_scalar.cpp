// The reference streaming attention: the skeleton of attention_stream.cpp computed one (i, j)
// at a time with scalar dot products, exactly as the CPU backend did before it was vectorised.
// Tests compare the backend's kernel with it (cpu_attention_*_reference in cpu_ops.h).
// FlashAttention-2 schedule on the CPU:
//   - query rows in blocks of kTile, key tiles of kTile, only tiles with j0 <= i (causal);
//     inside a tile only j <= i is computed (never "fill with zero": a rectifier with tau <= 0
//     would let a filled zero through);
//   - no T x T buffer: one kTile x kTile score tile per view per thread, plus per-row state;
//   - sparse policies skip zero weights in the P.V product and skip a whole (row block, key tile)
//     pair when no (i, j) in it survives in any view (counted in tiles_skipped).
// Forward:   o_i = sum_j a_ij v_j;  two views: o_i = sum_j (a1_ij - lambda a2_ij) v_j
// Backward:  e_ij = g_i.v_j;  ds_ij = f_ij (e_ij - D_i)   (D_i = g_i.o_i if normalised, else 0)
//            dv_j = sum_i (a1 - lambda a2)_ij g_i;  dq_i = scale sum_j ds_ij k_j;
//            dk_j = scale sum_i ds_ij q_i;  view 2 sees g2 = -lambda g.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/attention_cpu.h"

namespace tda {

namespace {
using namespace cpu_attn;

// Scores of rows [ib, i1) against keys [j0, j1) into st (kTile x kTile, row i at i - i0, where
// i0 <= ib is the block's first row), j <= i only.
inline void score_tile(float* st, const float* q, const float* k, int i0, int ib, int i1, int j0,
                       int j1, int D, float scale) {
  for (int i = ib; i < i1; ++i) {
    const int jend = std::min(j1, i + 1);
    for (int j = j0; j < jend; ++j)
      st[(i - i0) * kTile + (j - j0)] = scale * dot(q + size_t(i) * D, k + size_t(j) * D, D);
  }
}

// True when some causal (i, j), i in [ib, i1), of the tile has a non-zero weight in some view.
template <class P, bool kTwo>
bool tile_alive(const AttnArgs& a, const float* s1, const float* s2, int i0, int ib, int i1, int j0,
                int j1) {
  for (int i = ib; i < i1; ++i) {
    const float tau = a.tau ? a.tau[i] : 0.f;
    const int jend = std::min(j1, i + 1);
    for (int j = j0; j < jend; ++j) {
      const int idx = (i - i0) * kTile + (j - j0);
      if (s1[idx] > tau) return true;
      if (kTwo && s2[idx] > tau) return true;
    }
  }
  return false;
}

template <class P, bool kTwo>
void scalar_forward(const AttnArgs& a) {
  const int T = a.T, Dk = a.Dqk, Dv = a.Dv;
  const int nst = attn_n_stats(a.math);
  // Normalised two-view (diff_softmax) keeps two accumulators, one per softmax normaliser;
  // un-normalised two-view kinds fold lambda into one accumulator of (a1 - lambda a2).
  constexpr bool kTwoAcc = kTwo && P::kNormalized;
  const float lam = kTwo ? *a.lambda : 0.f;  // a device scalar (Ops::clamp_affine, diff_lambda)
  // Rows below q_start are not computed (KV-cache decoding): their outputs are zeroed, and the
  // row blocks start at the block holding q_start. Each computed row sees the same tiles in the
  // same order as in a full forward, so its result is bit-identical.
  TDA_CHECK(a.q_start >= 0 && a.q_start <= T, "attention: q_start outside [0, T]");
  const int qs = a.q_start, first_block = (qs / kTile) * kTile;
  for (int bh = 0; bh < a.B * a.H; ++bh) {
    std::fill(a.out + size_t(bh) * T * Dv, a.out + (size_t(bh) * T + qs) * Dv, 0.f);
    if (kTwoAcc) std::fill(a.out2 + size_t(bh) * T * Dv, a.out2 + (size_t(bh) * T + qs) * Dv, 0.f);
  }
  long long skipped = 0, total = 0;
#pragma omp parallel reduction(+ : skipped, total)
  {
    std::vector<float> s1(kTile * kTile), s2(kTwo ? kTile * kTile : 0);
    std::vector<float> acc1(size_t(kTile) * Dv), acc2(kTwoAcc ? size_t(kTile) * Dv : 0);
    std::vector<typename P::Row> row1(kTile), row2(kTile);
    std::vector<float> surv(size_t(kTile) * 3);
#pragma omp for collapse(2) schedule(dynamic)
    for (int bh = 0; bh < a.B * a.H; ++bh)
      for (int i0 = first_block; i0 < T; i0 += kTile) {
        const Slices x = slices(a, bh);
        const int i1 = std::min(T, i0 + kTile), ib = std::max(i0, qs);
        std::fill(row1.begin(), row1.end(), typename P::Row{});
        std::fill(row2.begin(), row2.end(), typename P::Row{});
        std::fill(acc1.begin(), acc1.end(), 0.f);
        std::fill(acc2.begin(), acc2.end(), 0.f);
        std::fill(surv.begin(), surv.end(), 0.f);
        for (int j0 = 0; j0 < i1; j0 += kTile) {
          const int j1 = std::min(i1, j0 + kTile);
          score_tile(s1.data(), x.q, x.k, i0, ib, i1, j0, j1, Dk, a.scale);
          if (kTwo) score_tile(s2.data(), x.q2, x.k2, i0, ib, i1, j0, j1, Dk, a.scale);
          ++total;
          if (P::kSparse && !a.no_skip &&
              !tile_alive<P, kTwo>(a, s1.data(), s2.data(), i0, ib, i1, j0, j1)) {
            ++skipped;  // every weight of the tile is exactly 0: nothing to add
            continue;
          }
          for (int i = ib; i < i1; ++i) {
            const int r = i - i0, jend = std::min(j1, i + 1);
            const float tau = a.tau ? a.tau[i] : 0.f;
            const float* t1 = s1.data() + r * kTile - j0;
            const float* t2 = kTwo ? s2.data() + r * kTile - j0 : nullptr;
            float* ar1 = acc1.data() + size_t(r) * Dv;
            float* ar2 = kTwoAcc ? acc2.data() + size_t(r) * Dv : nullptr;
            if (P::kOnlineMax) {
              // m_new = max(m, max_j s_ij); the accumulator is rescaled by exp(m - m_new)
              float mx1 = -INFINITY, mx2 = -INFINITY;
              for (int j = j0; j < jend; ++j) {
                mx1 = std::max(mx1, t1[j]);
                if (kTwo) mx2 = std::max(mx2, t2[j]);
              }
              const float c1 = P::rebase(row1[r], mx1);
              for (int d = 0; d < Dv; ++d) ar1[d] *= c1;
              if (kTwoAcc) {
                const float c2 = P::rebase(row2[r], mx2);
                for (int d = 0; d < Dv; ++d) ar2[d] *= c2;
              }
            }
            for (int j = j0; j < jend; ++j) {
              const float* vj = x.v + size_t(j) * Dv;
              const float w1 = P::weight(row1[r], t1[j], tau, a.power);
              P::add(row1[r], w1);
              float w = w1;
              if (kTwo) {
                const float w2 = P::weight(row2[r], t2[j], tau, a.power);
                P::add(row2[r], w2);
                if (a.survivors) {
                  surv[r * 3 + 1] += (w2 != 0.f);
                  surv[r * 3 + 2] += (w1 != 0.f && w2 != 0.f);
                }
                if (kTwoAcc) {
                  for (int d = 0; d < Dv; ++d) ar2[d] += w2 * vj[d];
                } else {
                  w = w1 - lam * w2;  // Delta a_ij = a1 - lambda a2
                }
              }
              if (a.survivors) surv[r * 3] += (w1 != 0.f);
              if (P::kSparse && w == 0.f) continue;  // exact zero: skip the value product
              for (int d = 0; d < Dv; ++d) ar1[d] += w * vj[d];
            }
          }
        }
        for (int i = ib; i < i1; ++i) {
          const int r = i - i0;
          const size_t row = size_t(bh) * T + i;
          const float inv1 = 1.f / P::norm(row1[r]);
          float* o = a.out + row * Dv;
          if (kTwoAcc) {
            // o = A1 V - lambda A2 V;  out2 = A2 V (the backward needs D2 and dlambda)
            const float inv2 = 1.f / P::norm(row2[r]);
            float* o2 = a.out2 + row * Dv;
            for (int d = 0; d < Dv; ++d) {
              o2[d] = acc2[size_t(r) * Dv + d] * inv2;
              o[d] = acc1[size_t(r) * Dv + d] * inv1 - lam * o2[d];
            }
          } else {
            for (int d = 0; d < Dv; ++d) o[d] = acc1[size_t(r) * Dv + d] * inv1;
          }
          if (nst >= 1) a.stats[row * nst] = P::stat(row1[r]);
          if (nst >= 2) a.stats[row * nst + 1] = P::stat(row2[r]);
          if (a.survivors) {
            const int ns = kTwo ? 3 : 1;
            for (int c = 0; c < ns; ++c) a.survivors[row * ns + c] = surv[r * 3 + c];
          }
        }
      }
  }
  if (a.tiles_skipped) *a.tiles_skipped += skipped;
  if (a.tiles_total) *a.tiles_total += total;
}

template <class P, bool kTwo>
void scalar_backward(const AttnArgs& a, bool drop_term) {
  const int T = a.T, Dk = a.Dqk, Dv = a.Dv;
  const int nst = attn_n_stats(a.math);
  const float lam = kTwo ? *a.lambda : 0.f;
#pragma omp parallel
  {
    std::vector<float> s1(kTile * kTile), s2(kTwo ? kTile * kTile : 0);
    std::vector<float> D1(size_t(T), 0.f), D2(size_t(T), 0.f);
    std::vector<float> dtau(static_cast<size_t>(T)), dlam(static_cast<size_t>(T));
    // One (b, h) per thread: dk, dv and the per-row scalar partials are owned by it, so every
    // sum below runs in a fixed order (bit-exact resume).
#pragma omp for schedule(dynamic)
    for (int bh = 0; bh < a.B * a.H; ++bh) {
      const Slices x = slices(a, bh);
      const BwdSlices g = begin_backward_bh<P, kTwo>(a, bh, lam, drop_term, D1, D2, dtau, dlam);
      const float* go = g.go;
      float *dq = g.dq, *dk = g.dk, *dq2 = g.dq2, *dk2 = g.dk2, *dv = g.dv;
      // Key tile outer, query blocks inner: dk/dv of a tile stay hot in cache.
      for (int j0 = 0; j0 < T; j0 += kTile) {
        const int j1 = std::min(T, j0 + kTile);
        for (int i0 = (j0 / kTile) * kTile; i0 < T; i0 += kTile) {
          const int i1 = std::min(T, i0 + kTile);
          score_tile(s1.data(), x.q, x.k, i0, i0, i1, j0, j1, Dk, a.scale);
          if (kTwo) score_tile(s2.data(), x.q2, x.k2, i0, i0, i1, j0, j1, Dk, a.scale);
          // A dead tile has a = 0 and da/ds = 0 everywhere: its ds, dv, dq, dk terms are all 0.
          if (P::kSparse && !a.no_skip &&
              !tile_alive<P, kTwo>(a, s1.data(), s2.data(), i0, i0, i1, j0, j1))
            continue;
          for (int i = std::max(i0, j0); i < i1; ++i) {
            const size_t row = size_t(bh) * T + i;
            const int jend = std::min(j1, i + 1);
            const float tau = a.tau ? a.tau[i] : 0.f;
            const float st1 = nst >= 1 ? a.stats[row * nst] : 0.f;
            const float st2 = nst >= 2 ? a.stats[row * nst + 1] : 0.f;
            const float* qi = x.q + size_t(i) * Dk;
            const float* q2i = kTwo ? x.q2 + size_t(i) * Dk : nullptr;
            const float* gi = go + size_t(i) * Dv;
            float* dqi = dq + size_t(i) * Dk;
            float* dq2i = kTwo ? dq2 + size_t(i) * Dk : nullptr;
            for (int j = j0; j < jend; ++j) {
              const int idx = (i - i0) * kTile + (j - j0);
              float a1, f1, a2 = 0.f, f2 = 0.f;
              P::bwd(s1[idx], st1, tau, a.power, &a1, &f1);
              if (kTwo) P::bwd(s2[idx], st2, tau, a.power, &a2, &f2);
              if (P::kSparse && a1 == 0.f && a2 == 0.f) continue;  // dead (i, j): all terms 0
              if (P::kSparse && drop_term) {
                f1 /= float(a.power);  // negative control: drop the chain-rule factor p
                f2 /= float(a.power);
              }
              const float* vj = x.v + size_t(j) * Dv;
              const float e = dot(gi, vj, Dv);  // e_ij = g_i.v_j = da_ij
              // view 1 sees g, view 2 sees -lambda g
              const float ds1 = f1 * (e - D1[i]);
              const float ds2 = kTwo ? f2 * (-lam * e - D2[i]) : 0.f;
              const float w = a1 - lam * a2;  // lam = 0 for one view
              float* dvj = dv + size_t(j) * Dv;
              for (int d = 0; d < Dv; ++d) dvj[d] += w * gi[d];
              if (kTwo && !P::kNormalized) dlam[i] -= e * a2;  // dlambda = -sum_ij e_ij a2_ij
              dtau[i] -= ds1 + ds2;                            // s - tau: dtau = -sum ds
              const float g1 = a.scale * ds1;
              const float* kj = x.k + size_t(j) * Dk;
              float* dkj = dk + size_t(j) * Dk;
              for (int d = 0; d < Dk; ++d) {
                dqi[d] += g1 * kj[d];
                dkj[d] += g1 * qi[d];
              }
              if (kTwo) {
                const float g2 = a.scale * ds2;
                const float* k2j = x.k2 + size_t(j) * Dk;
                float* dk2j = dk2 + size_t(j) * Dk;
                for (int d = 0; d < Dk; ++d) {
                  dq2i[d] += g2 * k2j[d];
                  dk2j[d] += g2 * q2i[d];
                }
              }
            }
          }
        }
      }
      end_backward_bh(a, bh, dtau, dlam);
    }
  }
}

template <class P, bool kTwo>
struct ScalarForward {
  static void run(const AttnArgs& a) { scalar_forward<P, kTwo>(a); }
};
template <class P, bool kTwo>
struct ScalarBackward {
  static void run(const AttnArgs& a, bool drop_term) { scalar_backward<P, kTwo>(a, drop_term); }
};
}  // namespace

void cpu_attention_forward_reference(const AttnArgs& in) {
  check_args(in);
  std::vector<float> q_store;
  dispatch<ScalarForward>(resolve(in, q_store), cpu_entmax_forward);
}

void cpu_attention_backward_reference(const AttnArgs& in, bool drop_term) {
  check_args(in);
  check_backward_args(in);
  std::vector<float> q_store;
  dispatch<ScalarBackward, bool>(resolve(in, q_store), cpu_entmax_backward, drop_term);
}

}  // namespace tda
