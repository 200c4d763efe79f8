// One streaming forward and one streaming backward for every tiled attention mechanism,
// templated on a policy from attention/policies.h (how a score becomes a weight, its derivative,
// the row statistic) and on the number of views. FlashAttention-2 schedule on the CPU:
//   - query rows in blocks of kTile, key tiles of kTile, only tiles with j0 <= i (causal);
//     inside a tile only j <= i is used (never "fill with zero": a rectifier with tau <= 0
//     would let a filled zero through; masked weights are written as exact zeros);
//   - no T x T buffer: a few kTile x kTile tiles per thread, plus per-row state;
//   - sparse policies skip a whole (row block, key tile) pair when no (i, j) in it survives in
//     any view (counted in tiles_skipped), and zero weights inside the products.
// Forward:   o_i = sum_j a_ij v_j;  two views: o_i = sum_j (a1_ij - lambda a2_ij) v_j
// Backward:  e_ij = g_i.v_j;  ds_ij = f_ij (e_ij - D_i)   (D_i = g_i.o_i if normalised, else 0)
//            dv_j = sum_i (a1 - lambda a2)_ij g_i;  dq_i = scale sum_j ds_ij k_j;
//            dk_j = scale sum_i ds_ij q_i;  view 2 sees g2 = -lambda g.
//
// Each tile is three steps: score products (S = Q K^T, E = G V^T) as small matrix products on
// simd::Vec registers, the policy's math row by row over the tile (vectorised loops), and the
// accumulating products (O += W V; dV += W^T G, dQ += dS K, dK += dS^T Q), again on registers.
// Every sum runs over j (or i) in increasing order, as in attention_scalar.cpp, the one (i, j) at
// a time reference the tests compare this with; only the exponential (fast_expf, not expf) and
// the order inside row sums (SIMD lanes) differ. The entmax kernel (attention_entmax.cpp) needs
// whole rows and has its own loop.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/attention_cpu.h"
#include "backend/cpu/fast_exp.h"
#include "backend/cpu/simd.h"

namespace tda {

namespace {
using namespace cpu_attn;
using simd::kLanes;
using simd::Vec;

// Register blocks: kRows rows x kVecs vectors of accumulators (16 of 32 zmm with AVX-512; 8 of
// 16 registers with AVX or SSE).
constexpr int kRows = 4;
constexpr int kVecs = kLanes == 16 ? 4 : 2;
static_assert(kTile % (kVecs * kLanes) == 0, "a tile row is whole register blocks");

// Bt (K x kTile) = the first `rows` rows of B (row stride ldb, K columns) transposed; columns
// past `rows` are zero.
void transpose_tile(float* Bt, const float* B, size_t ldb, int rows, int K) {
  std::fill(Bt, Bt + size_t(K) * kTile, 0.f);
  for (int j = 0; j < rows; ++j)
    for (int k = 0; k < K; ++k) Bt[size_t(k) * kTile + j] = B[size_t(j) * ldb + k];
}

// S[r][0..kTile) = scale * sum_{k<K} A[r lda + k] Bt[k][0..kTile) for R rows.
template <int R>
inline void scores_block(float* S, const float* A, size_t lda, const float* Bt, int K,
                         float scale) {
  for (int c0 = 0; c0 < kTile; c0 += kVecs * kLanes) {
    Vec acc[R][kVecs] = {};
    for (int k = 0; k < K; ++k) {
      Vec b[kVecs];
      for (int v = 0; v < kVecs; ++v) b[v] = simd::load(Bt + size_t(k) * kTile + c0 + v * kLanes);
      for (int r = 0; r < R; ++r) {
        const float x = A[r * lda + k];
        for (int v = 0; v < kVecs; ++v) acc[r][v] += x * b[v];
      }
    }
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < kVecs; ++v)
        simd::store(S + r * kTile + c0 + v * kLanes, acc[r][v] * scale);
  }
}

// The score tile of M rows of A against the kTile keys of Bt (see scores_block).
void tile_scores(float* S, const float* A, size_t lda, int M, const float* Bt, int K, float scale) {
  int r = 0;
  for (; r + kRows <= M; r += kRows)
    scores_block<kRows>(S + r * kTile, A + r * lda, lda, Bt, K, scale);
  for (; r < M; ++r) scores_block<1>(S + r * kTile, A + r * lda, lda, Bt, K, scale);
}

// C[r][0..NV lanes) += sum_{k<K} A(r, k) B[k][...] for R rows, A(r, k) = A[r ars + k aks].
// sparse: a k whose R coefficients are all zero adds nothing and is skipped.
template <int R, int NV>
inline void acc_block(float* C, size_t ldc, const float* A, size_t ars, size_t aks, int K,
                      const float* B, size_t ldb, bool sparse) {
  Vec acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = simd::load(C + r * ldc + v * kLanes);
  for (int k = 0; k < K; ++k) {
    float x[R];
    bool any = false;
    for (int r = 0; r < R; ++r) {
      x[r] = A[r * ars + k * aks];
      any |= x[r] != 0.f;
    }
    if (sparse && !any) continue;
    Vec b[NV];
    for (int v = 0; v < NV; ++v) b[v] = simd::load(B + size_t(k) * ldb + v * kLanes);
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < NV; ++v) acc[r][v] += x[r] * b[v];
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) simd::store(C + r * ldc + v * kLanes, acc[r][v]);
}

template <int R>
void acc_rows(float* C, size_t ldc, int N, const float* A, size_t ars, size_t aks, int K,
              const float* B, size_t ldb, bool sparse) {
  int c = 0;
  for (; c + kVecs * kLanes <= N; c += kVecs * kLanes)
    acc_block<R, kVecs>(C + c, ldc, A, ars, aks, K, B + c, ldb, sparse);
  for (; c + kLanes <= N; c += kLanes)
    acc_block<R, 1>(C + c, ldc, A, ars, aks, K, B + c, ldb, sparse);
  for (; c < N; ++c)  // a head dim that is not a multiple of the vector width
    for (int r = 0; r < R; ++r) {
      float s = C[r * ldc + c];
      for (int k = 0; k < K; ++k) s += A[r * ars + k * aks] * B[size_t(k) * ldb + c];
      C[r * ldc + c] = s;
    }
}

// C (M x N, row stride ldc) += A B with A(r, k) = A[r ars + k aks] (M x K) and B (K x N, row
// stride ldb): ars = kTile, aks = 1 reads a tile as is, ars = 1, aks = kTile its transpose.
void tile_accumulate(float* C, size_t ldc, int M, int N, const float* A, size_t ars, size_t aks,
                     int K, const float* B, size_t ldb, bool sparse) {
  int r = 0;
  for (; r + kRows <= M; r += kRows)
    acc_rows<kRows>(C + r * ldc, ldc, N, A + r * ars, ars, aks, K, B, ldb, sparse);
  for (; r < M; ++r) acc_rows<1>(C + r * ldc, ldc, N, A + r * ars, ars, aks, K, B, ldb, sparse);
}

// True when a causal score of the tile exceeds its row's tau (0 without tau), i.e. some weight
// is non-zero: rows ib..ib+M-1 (S holds row ib first), keys j0..min(j1, i + 1) - 1.
bool any_above(const float* S, int ib, int M, int j0, int j1, const float* tau) {
  for (int r = 0; r < M; ++r) {
    const int i = ib + r, n = std::min(j1, i + 1) - j0;
    const float* s = S + r * kTile;
    const float t = tau ? tau[i] : 0.f;
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int j = 0; j < n; ++j) mx = s[j] > mx ? s[j] : mx;
    if (mx > t) return true;
  }
  return false;
}

// The policy's math over the n causal scores of one row: weights (forward) and (a, f)
// (backward). The default applies the policy's scalar functions; softmax and the threshold
// rectifier have loops the compiler vectorises.
template <class P>
struct RowMath {
  // w[j] for j < n, folded into the row state; returns the factor that rescales the row's
  // accumulator (online-max policies), 1 otherwise.
  static float weights(typename P::Row& row, const float* s, float* w, int n, float tau, int p) {
    float c = 1.f;
    if (P::kOnlineMax) {
      float mx = -INFINITY;
      for (int j = 0; j < n; ++j) mx = std::max(mx, s[j]);
      c = P::rebase(row, mx);
    }
    for (int j = 0; j < n; ++j) {
      w[j] = P::weight(row, s[j], tau, p);
      P::add(row, w[j]);
    }
    return c;
  }
  static void bwd(const float* s, float stat, float tau, int p, float* a, float* f, int n) {
    for (int j = 0; j < n; ++j) P::bwd(s[j], stat, tau, p, &a[j], &f[j]);
  }
};

template <>
struct RowMath<attn::SoftmaxPolicy> {
  using P = attn::SoftmaxPolicy;
  static float weights(P::Row& row, const float* s, float* w, int n, float, int) {
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int j = 0; j < n; ++j) mx = s[j] > mx ? s[j] : mx;
    const float c = P::rebase(row, mx);
    const float m = row.m;
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < n; ++j) {
      w[j] = fast_expf(s[j] - m);
      sum += w[j];
    }
    row.l += sum;
    return c;
  }
  static void bwd(const float* s, float lse, float, int, float* a, float* f, int n) {
#pragma omp simd
    for (int j = 0; j < n; ++j) {
      a[j] = fast_expf(s[j] - lse);
      f[j] = a[j];
    }
  }
};

template <>
struct RowMath<attn::ThresholdPolicy> {
  // r^p as ipow computes it (1 * r * r ...), for the same bits.
  static float power(float r, int p) {
    float y = 1.f;
    for (int e = 0; e < p; ++e) y *= r;
    return y;
  }
  static float weights(attn::ThresholdPolicy::Row&, const float* s, float* w, int n, float tau,
                       int p) {
    if (p == 2) {
#pragma omp simd
      for (int j = 0; j < n; ++j) {
        const float r = s[j] - tau;
        w[j] = r > 0.f ? r * r : 0.f;
      }
    } else if (p == 1) {
#pragma omp simd
      for (int j = 0; j < n; ++j) {
        const float r = s[j] - tau;
        w[j] = r > 0.f ? r : 0.f;
      }
    } else {
      for (int j = 0; j < n; ++j) {
        const float r = s[j] - tau;
        w[j] = r > 0.f ? power(r, p) : 0.f;
      }
    }
    return 1.f;
  }
  static void bwd(const float* s, float, float tau, int p, float* a, float* f, int n) {
    if (p == 2) {
#pragma omp simd
      for (int j = 0; j < n; ++j) {
        const float r = s[j] - tau;
        a[j] = r > 0.f ? r * r : 0.f;
        f[j] = r > 0.f ? 2.f * r : 0.f;
      }
    } else {
      for (int j = 0; j < n; ++j) {
        const float r = s[j] - tau;
        a[j] = r > 0.f ? power(r, p) : 0.f;
        f[j] = r > 0.f ? float(p) * power(r, p - 1) : 0.f;
      }
    }
  }
};

// K^T of every (b, h) and key tile (kTile columns per row of D, zero past T): the forward's score
// products read keys as columns, and each tile is read by every query block after it.
std::vector<float> transposed_keys(const AttnArgs& a, bool second) {
  const int nt = (a.T + kTile - 1) / kTile, BH = a.B * a.H, D = a.Dqk;
  std::vector<float> kt(size_t(BH) * nt * D * kTile);
#pragma omp parallel for collapse(2) schedule(static)
  for (int bh = 0; bh < BH; ++bh)
    for (int t = 0; t < nt; ++t) {
      const Slices x = slices(a, bh);
      const float* k = second ? x.k2 : x.k;
      transpose_tile(kt.data() + (size_t(bh) * nt + t) * D * kTile, k + size_t(t) * kTile * D,
                     size_t(D), std::min(kTile, a.T - t * kTile), D);
    }
  return kt;
}

template <class P, bool kTwo>
void stream_forward(const AttnArgs& a) {
  const int T = a.T, Dk = a.Dqk, Dv = a.Dv;
  const int nst = attn_n_stats(a.math), nt = (T + kTile - 1) / kTile;
  // Normalised two-view (diff_softmax) keeps two accumulators, one per softmax normaliser;
  // un-normalised two-view kinds fold lambda into one accumulator of (a1 - lambda a2).
  constexpr bool kTwoAcc = kTwo && P::kNormalized;
  // Rows below q_start are not computed (KV-cache decoding): their outputs are zeroed, and the
  // row blocks start at the block holding q_start. Each computed row sees the same tiles in the
  // same order as in a full forward, so its result is bit-identical.
  TDA_CHECK(a.q_start >= 0 && a.q_start <= T, "attention: q_start outside [0, T]");
  const int qs = a.q_start, first_block = (qs / kTile) * kTile;
  const float lam = kTwo ? *a.lambda : 0.f;
  for (int bh = 0; bh < a.B * a.H; ++bh) {
    std::fill(a.out + size_t(bh) * T * Dv, a.out + (size_t(bh) * T + qs) * Dv, 0.f);
    if (kTwoAcc) std::fill(a.out2 + size_t(bh) * T * Dv, a.out2 + (size_t(bh) * T + qs) * Dv, 0.f);
  }
  const std::vector<float> kt = transposed_keys(a, false);
  const std::vector<float> k2t = kTwo ? transposed_keys(a, true) : std::vector<float>();
  const size_t tile_floats = size_t(Dk) * kTile;
  long long skipped = 0, total = 0;
#pragma omp parallel reduction(+ : skipped, total)
  {
    std::vector<float> s1(kTile * kTile), s2(kTwo ? kTile * kTile : 0);
    std::vector<float> w1(kTile * kTile), w2(kTwo ? kTile * kTile : 0);
    std::vector<float> acc1(size_t(kTile) * Dv), acc2(kTwoAcc ? size_t(kTile) * Dv : 0);
    std::vector<typename P::Row> row1(kTile), row2(kTile);
    std::vector<float> surv(size_t(kTile) * 3);
#pragma omp for collapse(2) schedule(dynamic)
    for (int bh = 0; bh < a.B * a.H; ++bh)
      for (int i0 = first_block; i0 < T; i0 += kTile) {
        const Slices x = slices(a, bh);
        const int i1 = std::min(T, i0 + kTile), ib = std::max(i0, qs), M = i1 - ib;
        std::fill(row1.begin(), row1.end(), typename P::Row{});
        std::fill(row2.begin(), row2.end(), typename P::Row{});
        std::fill(acc1.begin(), acc1.end(), 0.f);
        std::fill(acc2.begin(), acc2.end(), 0.f);
        std::fill(surv.begin(), surv.end(), 0.f);
        float* const S1 = s1.data() + (ib - i0) * kTile;
        float* const S2 = kTwo ? s2.data() + (ib - i0) * kTile : nullptr;
        for (int j0 = 0; j0 < i1; j0 += kTile) {
          const int j1 = std::min(i1, j0 + kTile);
          const size_t tile = size_t(bh) * nt + size_t(j0 / kTile);
          tile_scores(S1, x.q + size_t(ib) * Dk, size_t(Dk), M, kt.data() + tile * tile_floats, Dk,
                      a.scale);
          if (kTwo)
            tile_scores(S2, x.q2 + size_t(ib) * Dk, size_t(Dk), M, k2t.data() + tile * tile_floats,
                        Dk, a.scale);
          ++total;
          if (P::kSparse && !a.no_skip && !any_above(S1, ib, M, j0, j1, a.tau) &&
              !(kTwo && any_above(S2, ib, M, j0, j1, a.tau))) {
            ++skipped;  // every weight of the tile is exactly 0: nothing to add
            continue;
          }
          for (int i = ib; i < i1; ++i) {
            const int r = i - i0, n = std::min(j1, i + 1) - j0;
            const float tau = a.tau ? a.tau[i] : 0.f;
            float* const wr1 = w1.data() + r * kTile;
            const float c1 =
                RowMath<P>::weights(row1[r], s1.data() + r * kTile, wr1, n, tau, a.power);
            std::fill(wr1 + n, wr1 + kTile, 0.f);  // masked keys: exact zeros
            if (P::kOnlineMax && c1 != 1.f)
              for (int d = 0; d < Dv; ++d) acc1[size_t(r) * Dv + d] *= c1;
            if (a.survivors)
              for (int j = 0; j < n; ++j) surv[r * 3] += (wr1[j] != 0.f);
            if (!kTwo) continue;
            float* const wr2 = w2.data() + r * kTile;
            const float c2 =
                RowMath<P>::weights(row2[r], s2.data() + r * kTile, wr2, n, tau, a.power);
            std::fill(wr2 + n, wr2 + kTile, 0.f);
            if (a.survivors)
              for (int j = 0; j < n; ++j) {
                surv[r * 3 + 1] += (wr2[j] != 0.f);
                surv[r * 3 + 2] += (wr1[j] != 0.f && wr2[j] != 0.f);
              }
            if (kTwoAcc) {
              if (P::kOnlineMax && c2 != 1.f)
                for (int d = 0; d < Dv; ++d) acc2[size_t(r) * Dv + d] *= c2;
            } else {
              // Delta a_ij = a1 - lambda a2 (lam: the device lambda, read once above)
#pragma omp simd
              for (int j = 0; j < n; ++j) wr1[j] = wr1[j] - lam * wr2[j];
            }
          }
          const float* vt = x.v + size_t(j0) * Dv;
          tile_accumulate(acc1.data() + size_t(ib - i0) * Dv, size_t(Dv), M, Dv,
                          w1.data() + (ib - i0) * kTile, kTile, 1, j1 - j0, vt, size_t(Dv),
                          P::kSparse);
          if (kTwoAcc)
            tile_accumulate(acc2.data() + size_t(ib - i0) * Dv, size_t(Dv), M, Dv,
                            w2.data() + (ib - i0) * kTile, kTile, 1, j1 - j0, vt, size_t(Dv),
                            P::kSparse);
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
void stream_backward(const AttnArgs& a, bool drop_term) {
  const int T = a.T, Dk = a.Dqk, Dv = a.Dv;
  const int nst = attn_n_stats(a.math);
  const float lam = kTwo ? *a.lambda : 0.f;
#pragma omp parallel
  {
    constexpr int kTT = kTile * kTile;
    std::vector<float> s1(kTT), s2(kTwo ? kTT : 0), e(kTT), w(kTT), ds1(kTT), ds2(kTwo ? kTT : 0);
    std::vector<float> a1(kTile), f1(kTile), a2(kTile), f2(kTile);
    std::vector<float> kt(size_t(Dk) * kTile), k2t(kTwo ? size_t(Dk) * kTile : 0),
        vt(size_t(Dv) * kTile);
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
        const int j1 = std::min(T, j0 + kTile), nk = j1 - j0;
        transpose_tile(kt.data(), x.k + size_t(j0) * Dk, size_t(Dk), nk, Dk);
        if (kTwo) transpose_tile(k2t.data(), x.k2 + size_t(j0) * Dk, size_t(Dk), nk, Dk);
        transpose_tile(vt.data(), x.v + size_t(j0) * Dv, size_t(Dv), nk, Dv);
        for (int i0 = j0; i0 < T; i0 += kTile) {
          const int i1 = std::min(T, i0 + kTile), M = i1 - i0;
          tile_scores(s1.data(), x.q + size_t(i0) * Dk, size_t(Dk), M, kt.data(), Dk, a.scale);
          if (kTwo)
            tile_scores(s2.data(), x.q2 + size_t(i0) * Dk, size_t(Dk), M, k2t.data(), Dk, a.scale);
          // A dead tile has a = 0 and da/ds = 0 everywhere: its ds, dv, dq, dk terms are all 0.
          if (P::kSparse && !a.no_skip && !any_above(s1.data(), i0, M, j0, j1, a.tau) &&
              !(kTwo && any_above(s2.data(), i0, M, j0, j1, a.tau)))
            continue;
          tile_scores(e.data(), go + size_t(i0) * Dv, size_t(Dv), M, vt.data(), Dv, 1.f);
          for (int i = i0; i < i1; ++i) {
            const size_t row = size_t(bh) * T + i;
            const int r = i - i0, n = std::min(j1, i + 1) - j0;
            const float tau = a.tau ? a.tau[i] : 0.f;
            const float st1 = nst >= 1 ? a.stats[row * nst] : 0.f;
            const float st2 = nst >= 2 ? a.stats[row * nst + 1] : 0.f;
            RowMath<P>::bwd(s1.data() + r * kTile, st1, tau, a.power, a1.data(), f1.data(), n);
            if (kTwo)
              RowMath<P>::bwd(s2.data() + r * kTile, st2, tau, a.power, a2.data(), f2.data(), n);
            else
              std::fill(a2.begin(), a2.begin() + n, 0.f);
            if (P::kSparse && drop_term)
              for (int j = 0; j < n; ++j) {
                f1[j] /= float(a.power);  // negative control: drop the chain-rule factor p
                f2[j] /= float(a.power);
              }
            const float* er = e.data() + r * kTile;
            float* wr = w.data() + r * kTile;
            float* d1r = ds1.data() + r * kTile;
            float* d2r = kTwo ? ds2.data() + r * kTile : nullptr;
            const float Di1 = D1[i], Di2 = D2[i], scale = a.scale;
            float sum_ds = 0.f, sum_ea2 = 0.f;
            // view 1 sees g, view 2 sees -lambda g;  w = a1 - lambda a2 (lambda = 0: one view)
#pragma omp simd reduction(+ : sum_ds, sum_ea2)
            for (int j = 0; j < n; ++j) {
              const float d1 = f1[j] * (er[j] - Di1);
              const float d2 = kTwo ? f2[j] * (-lam * er[j] - Di2) : 0.f;
              wr[j] = a1[j] - lam * a2[j];
              d1r[j] = scale * d1;
              if (kTwo) d2r[j] = scale * d2;
              sum_ds += d1 + d2;
              sum_ea2 += er[j] * a2[j];
            }
            std::fill(wr + n, wr + kTile, 0.f);  // masked keys: exact zeros
            std::fill(d1r + n, d1r + kTile, 0.f);
            if (kTwo) std::fill(d2r + n, d2r + kTile, 0.f);
            dtau[i] -= sum_ds;                                // s - tau: dtau = -sum ds
            if (kTwo && !P::kNormalized) dlam[i] -= sum_ea2;  // dlambda = -sum_ij e_ij a2_ij
          }
          // dv_j += sum_i w_ij g_i;  dq_i += sum_j ds_ij k_j;  dk_j += sum_i ds_ij q_i
          tile_accumulate(dv + size_t(j0) * Dv, size_t(Dv), nk, Dv, w.data(), 1, kTile, M,
                          go + size_t(i0) * Dv, size_t(Dv), P::kSparse);
          tile_accumulate(dq + size_t(i0) * Dk, size_t(Dk), M, Dk, ds1.data(), kTile, 1, nk,
                          x.k + size_t(j0) * Dk, size_t(Dk), P::kSparse);
          tile_accumulate(dk + size_t(j0) * Dk, size_t(Dk), nk, Dk, ds1.data(), 1, kTile, M,
                          x.q + size_t(i0) * Dk, size_t(Dk), P::kSparse);
          if (kTwo) {
            tile_accumulate(dq2 + size_t(i0) * Dk, size_t(Dk), M, Dk, ds2.data(), kTile, 1, nk,
                            x.k2 + size_t(j0) * Dk, size_t(Dk), P::kSparse);
            tile_accumulate(dk2 + size_t(j0) * Dk, size_t(Dk), nk, Dk, ds2.data(), 1, kTile, M,
                            x.q2 + size_t(i0) * Dk, size_t(Dk), P::kSparse);
          }
        }
      }
      end_backward_bh(a, bh, dtau, dlam);
    }
  }
}

template <class P, bool kTwo>
struct StreamForward {
  static void run(const AttnArgs& a) { stream_forward<P, kTwo>(a); }
};
template <class P, bool kTwo>
struct StreamBackward {
  static void run(const AttnArgs& a, bool drop_term) { stream_backward<P, kTwo>(a, drop_term); }
};
}  // namespace

void CpuOps::attention_forward(const AttnArgs& in) {
  check_args(in);
  std::vector<float> q_store;
  dispatch<StreamForward>(resolve(in, q_store), cpu_entmax_forward);
}

void cpu_attention_backward(const AttnArgs& in, bool drop_term) {
  check_args(in);
  check_backward_args(in);
  std::vector<float> q_store;
  dispatch<StreamBackward, bool>(resolve(in, q_store), cpu_entmax_backward, drop_term);
}

void CpuOps::attention_backward(const AttnArgs& in) {
  cpu_attention_backward(in, false);
}

}  // namespace tda
