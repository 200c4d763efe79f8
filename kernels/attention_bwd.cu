// Streaming attention backward on tensor cores for every tiled mechanism (policies of
// attention/policies.h; reference: stream_backward in src/backend/cpu/attention_stream.cpp).
// With s = scale q.k recomputed per tile and (a, f) = P::bwd(s, stat_i, tau_i, p) (softmax:
// bwd_raw(q.k, scale, stat_i), the scale folded into the exponent's FFMA):
//   e_ij = g_i.v_j (dO V^T on tensor cores);  ds_ij = f_ij (e_ij - D_i);  view 2: f2 (-lambda e -
//   D2) D_i = g_i.o_i for normalised policies (rowdot kernel), 0 otherwise dq_i = scale sum_j ds_ij
//   k_j              dq kernel: a block per 64 query rows, key tiles stream dk_j = scale sum_i
//   ds_ij q_i, dv_j = sum_i (a1 - lambda a2)_ij g_i
//                                             dkdv kernel: a block per 64 keys, query tiles stream
//   drow_tau_i = -sum_j (ds1 + ds2);  drow_lambda_i = -g.o2 (diff softmax) or -sum_j e a2
//   (rectifiers)
// Every output is owned by one block and summed in a fixed order: no atomics, deterministic. A
// (query tile, key tile) pair with no non-zero weight (sparse policies) has a = f = 0: all its
// terms vanish and both kernels skip its dO V^T and products. attention.deterministic false
// (AttnArgs::atomic_dq) runs FlashAttention-2's single kernel instead: the dk/dv kernel also adds
// dq and the row gradients by fp32 atomics (fa_zero_dq_kernel, below), and the dq kernel is not
// launched.
#include <type_traits>

#include "backend/cuda/attention_tc.cuh"
#include "backend/cuda/common.h"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"

namespace tda::cuda {

namespace {
using namespace fa;

// The dq and dk/dv kernels' argument: the attention call (TileArgs) plus the scales of ds and of
// drow_tau. Both are a.scale and 1 except under the negative control of the test-only entry point
// (cuda::attention_backward's drop_term; never set by Ops), which drops the rectifiers' chain-rule
// factor p from f: ds scaled by 1/p, and drow_tau, summed unscaled, scaled once per row. Until
// 2026-11-27 the kernels divided f by p per score under a runtime test, which ptxas kept in the
// key loop (a branch and a division per score, scripts/bench/sass_tiles.py counts both sides).
struct BwdArgs : TileArgs {
  float ds_scale = 0.f, dtau_scale = 1.f;
};
template <class P>
void set_bwd_args(BwdArgs* ka, const AttnArgs& a, bool drop_term) {
  set_tile_args<P>(ka, a);
  const bool drop_p = drop_term && P::kSparse && !P::kNormalized;
  ka->dtau_scale = drop_p ? 1.f / float(a.power) : 1.f;
  ka->ds_scale = a.scale * ka->dtau_scale;
}

// One warp per row: D1 = g.o1 = g.out + lambda g.o2, D2 = -lambda g.o2; drow_lambda = -g.o2.
// g is rounded to bf16 as in e_ij = g_i.v_j, so that sum_j a_ij (e_ij - D_i) stays ~0 as in exact
// arithmetic (with fp32 g, D would differ from sum_j a_ij e_ij by the rounding of g: a bias on
// every ds of the row).
template <bool kTwo>
__global__ void __launch_bounds__(kThreads)
    fa_rowdot_kernel(AttnArgs a, float* Dbuf, bool drop_term) {
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, Dv = a.Dv;
  const size_t r = size_t(blockIdx.x) * kWarps + warp;
  if (r >= size_t(a.B) * a.H * a.T) return;
  const float* g = a.dout + r * Dv;
  float go = 0.f, go2 = 0.f;
  for (int d = lane; d < Dv; d += kWarp) {
    const float gd = __bfloat162float(__float2bfloat16(g[d]));
    go += gd * a.out[r * Dv + d];
    if (kTwo) go2 += gd * a.out2[r * Dv + d];
  }
  go = warp_sum(go);
  if (kTwo) go2 = warp_sum(go2);
  if (lane == 0) {
    const bool drop = drop_term;               // negative control (tests only)
    const float lam = kTwo ? *a.lambda : 0.f;  // a device scalar (ops.h)
    Dbuf[2 * r] = drop ? 0.f : go + lam * go2;
    Dbuf[2 * r + 1] = drop ? 0.f : -lam * go2;
    if (kTwo && a.drow_lambda) a.drow_lambda[r] = -go2;
  }
}

// ds for one (i, j); returns the weight a1 - lambda a2 (for dv) and writes the scaled ds.
// lambda is a device scalar (ops.h), read where it is used: a local copy held over the unrolled
// tile loops costs a register, and spilled in the Diff kinds' forward on sm_90.
template <class P, bool kTwo>
__device__ inline float grad_entry(const BwdArgs& a, float s1, float s2, float e, float st1,
                                   float st2, float tau, float D1, float D2, float* ds1, float* ds2,
                                   float* dtau, float* dlam) {
  float a1, f1, a2 = 0.f, f2 = 0.f;
  if constexpr (folds_scale<P, kTwo>())  // s1 is the raw score
    P::bwd_raw(s1, a.score_scale, st1, &a1, &f1);
  else
    P::bwd(s1, st1, tau, P::param(a), &a1, &f1);
  if (kTwo) P::bwd(s2, st2, tau, P::param(a), &a2, &f2);
  const float d1 = f1 * (e - D1), d2 = kTwo ? f2 * (-*a.lambda * e - D2) : 0.f;
  *dtau -= d1 + d2;  // times a.dtau_scale once per row
  if (kTwo && !P::kNormalized) *dlam -= e * a2;
  *ds1 = a.ds_scale * d1;
  *ds2 = a.ds_scale * d2;
  return a1 - (kTwo ? *a.lambda : 0.f) * a2;
}

// grad_entry for clips_scores<P>() (p = 2), from r = s - tau_i: f = 2 m (m = max(r, 0)), so
// f e = 2 (m e), and the 2 rides in ds_f = 2 ds_scale and in dtau's final 2 dtau_scale. Doubling
// is exact, so ds and dtau are grad_entry's bits (but where m e is subnormal, below 1.2e-38).
template <class P, bool kTwo>
__device__ inline void grad_entry_clipped(const BwdArgs& a, float r1, float r2, float e, float ds_f,
                                          float* ds1, float* ds2, float* dtau, float* dlam) {
  const float m1 = fmaxf(r1, 0.f), m2 = kTwo ? fmaxf(r2, 0.f) : 0.f;
  const float u1 = m1 * e, u2 = kTwo ? m2 * (-*a.lambda * e) : 0.f;  // f e / 2
  *dtau -= u1 + u2;  // times 2 dtau_scale once per row
  if (kTwo) *dlam -= e * P::weight_clipped(m2);
  *ds1 = ds_f * u1;
  *ds2 = ds_f * u2;
}

template <class P, bool kTwo, int kDk, int kDv>
__global__ void __launch_bounds__(kThreads)
    fa_dq_kernel(BwdArgs a, AttnBf16Operands in, size_t sqk, const float* Dbuf) {
  constexpr int kN = kDk / 8, nst = n_stats<P, kTwo>();
  constexpr bool kCut = kTwo && P::kNormalized;  // diff softmax: mma_rows' kCutD
  constexpr bool kClip = clips_scores<P>();      // grad_entry_clipped
  TDA_DYNAMIC_SHARED(uint16_t, smem);
  uint16_t* sq = smem;
  uint16_t* sk = sq + tile_elems<kDk>();
  uint16_t* sq2 = sk + tile_elems<kDk>();  // two views only
  uint16_t* sk2 = sq2 + (kTwo ? tile_elems<kDk>() : 0);
  uint16_t* sg = sk2 + (kTwo ? tile_elems<kDk>() : 0);
  uint16_t* sv = sg + tile_elems<kDv>();
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int T = a.T, Dk = a.Dqk, Dv = a.Dv;
  size_t bh;
  if (!block_bh(a, &bh)) return;  // past B*H: the rounding of a (y, z)-split grid
  const int i0 = int(blockIdx.x) * kTile, i1 = min(T, i0 + kTile);
  const size_t bqk = bh * size_t(T) * kDk, bv = bh * size_t(T) * kDv;
  load_tile_async<kDk>(sq, in.q + bqk, i0, T);
  load_tile_async<kDv>(sg, in.g + bv, i0, T);
  if (kTwo) load_tile_async<kDk>(sq2, in.q2 + bqk, i0, T);
  cp_async_commit();  // waited for with the first K tile
  int row[2];
  float tau[2], st1[2], st2[2], D1[2], D2[2], dtau[2] = {}, dlam[2] = {};
  TDA_UNROLL
  for (int h = 0; h < 2; ++h) {
    row[h] = i0 + 16 * warp + (lane >> 2) + 8 * h;
    const bool in = row[h] < T;
    const size_t r = bh * T + (in ? row[h] : 0);
    row_tau_stat<P, kTwo>(a, r, row[h], in, &tau[h], &st1[h]);
    st2[h] = (kTwo && nst >= 2 && in) ? a.stats[r * nst + 1] : 0.f;
    st1[h] *= score_frame<P>();  // the saved statistic in the scores' frame
    st2[h] *= score_frame<P>();
    D1[h] = (P::kNormalized && in) ? Dbuf[2 * r] : 0.f;
    D2[h] = (P::kNormalized && in) ? Dbuf[2 * r + 1] : 0.f;
  }
  float dq1[kN][4], dq2[kTwo ? kN : 1][4];
  TDA_UNROLL
  for (int n = 0; n < kN; ++n) TDA_UNROLL
  for (int c = 0; c < 4; ++c) dq1[n][c] = dq2[kTwo ? n : 0][c] = 0.f;

  // cp.async tiles: V(j) is copied while S = Q K(j)^T and the tile's liveness are computed.
  // Causal masking on the diagonal tile only (j0 = i0, the last), as in the forward: the tiles
  // before it take every score, rows past T included (finite, never written), and test the row
  // only for the tile skip.
  const bool row_ok[2] = {row[0] < T, row[1] < T};
  const float ds_f = clipped_slope<P>(a.ds_scale);  // grad_entry_clipped's
  auto tile = [&](const int j0, auto diagonal) {
    constexpr bool kDiag = decltype(diagonal)::value;
    auto ok = [&](int nt, int c) {
      return kDiag ? j0 + acc_col(lane, nt, c) <= row[c >> 1] && row_ok[c >> 1] : true;
    };
    __syncthreads();  // nobody reads the previous tiles any more
    // No row test before the diagonal tile (kAnyRow: its rows are all < i0 <= T). On it, K keeps
    // the test too: dq += ds K multiplies a masked key's ds = 0 by its row.
    load_tile_async<kDk, !kDiag>(sk, in.k + bqk, j0, T);
    if (kTwo) load_tile_async<kDk, !kDiag>(sk2, in.k2 + bqk, j0, T);
    cp_async_commit();
    load_tile_async<kDv, !kDiag>(sv, in.v + bv, j0, T);
    cp_async_commit();
    cp_async_wait<1>();  // all but V(j)
    __syncthreads();
    float s1[8][4], s2[kTwo ? 8 : 1][4], e[8][4];
    mma_rows<kDk, 8, kCut>(s1, sq + 16 * warp * ld<kDk>(), sk, lane, Dk);
    if (kTwo) mma_rows<kDk, 8, kCut>(s2, sq2 + 16 * warp * ld<kDk>(), sk2, lane, Dk);
    bool alive = true;  // softmax keeps its scores raw (folds_scale) and skips no tile
    constexpr bool kShift = shifts_scores<P>();  // then s1, s2 hold r = s - tau_i
    if constexpr (!folds_scale<P, kTwo>())
      alive = scale_rows_alive<kTwo, kDiag, kShift>(s1, s2, a.score_scale, tau, row_ok, ok);
    if (P::kSparse && !a.no_skip && !__syncthreads_or(alive)) {
      cp_async_wait<0>();  // V(j) lands before its buffer is refilled
      return;
    }
    cp_async_wait<0>();
    __syncthreads();                                                      // V(j) has landed
    mma_rows<kDv, 8, kCut>(e, sg + 16 * warp * ld<kDv>(), sv, lane, Dv);  // e_ij = g_i.v_j
    TDA_UNROLL
    for (int nt = 0; nt < 8; ++nt) TDA_UNROLL
    for (int c = 0; c < 4; ++c) {
      const int h = c >> 1;
      float ds1 = 0.f, ds2 = 0.f;
      if constexpr (kClip) {
        if (ok(nt, c))
          grad_entry_clipped<P, kTwo>(a, s1[nt][c], kTwo ? s2[nt][c] : 0.f, e[nt][c], ds_f, &ds1,
                                      &ds2, &dtau[h], &dlam[h]);
      } else if (ok(nt, c)) {
        grad_entry<P, kTwo>(a, s1[nt][c], kTwo ? s2[nt][c] : 0.f, e[nt][c], st1[h], st2[h],
                            kShift ? 0.f : tau[h], D1[h], D2[h], &ds1, &ds2, &dtau[h], &dlam[h]);
      }
      s1[nt][c] = ds1;
      if (kTwo) s2[nt][c] = ds2;
    }
    mma_acc<kDk, 8, kCut>(dq1, s1, sk, lane, Dk);  // dq += ds K
    if (kTwo) mma_acc<kDk, 8, kCut>(dq2, s2, sk2, lane, Dk);
  };
  if constexpr (kTwo && P::kNormalized) {  // diff softmax: a second copy of its tile spills
    for (int j0 = 0; j0 < i1; j0 += kTile) tile(j0, std::true_type{});
  } else {
    for (int j0 = 0; j0 < i0; j0 += kTile) tile(j0, std::false_type{});
    tile(i0, std::true_type{});
  }

  // two views: held over the loop, bh spilled (sm_80); one view: re-read, softmax's spilled (sm_90)
  if constexpr (kTwo) bh = block_bh_again();
  TDA_UNROLL
  for (int h = 0; h < 2; ++h) {
    dtau[h] = quad_sum(dtau[h]);
    dlam[h] = quad_sum(dlam[h]);
    if (row[h] >= T) continue;
    const size_t r = bh * T + row[h];
    float* dq1r = a.dq + bh * sqk + size_t(row[h]) * Dk;
    float* dq2r = kTwo ? a.dq2 + bh * sqk + size_t(row[h]) * Dk : nullptr;
    TDA_UNROLL
    for (int n = 0; n < kN; ++n) TDA_UNROLL
    for (int c = 0; c < 2; ++c) {
      const int d = 8 * n + 2 * (lane & 3) + c;
      if (d >= Dk) continue;
      dq1r[d] = dq1[n][2 * h + c];
      if (kTwo) dq2r[d] = dq2[n][2 * h + c];
    }
    if ((lane & 3) == 0) {
      if (a.drow_tau) a.drow_tau[r] = dtau[h] * clipped_slope<P>(a.dtau_scale);
      // diff softmax's drow_lambda comes from the rowdot kernel
      if (a.drow_lambda && !(kTwo && P::kNormalized)) a.drow_lambda[r] = dlam[h];
    }
  }
}

// attention.deterministic false (AttnArgs::atomic_dq): FlashAttention-2's backward, one kernel.
// The dk/dv kernel, which already forms every ds_ij of its key tile, also adds dq_i += sum_j
// ds_ij k_j and the row gradients by fp32 atomics, so the dq kernel and its second recomputation
// of S and dO V^T are gone; the sums' order then depends on the blocks' timing. This kernel zeroes
// what those atomics add into (one warp per row): dq (dq2), drow_tau, and drow_lambda wherever the
// dq kernel would write it (`lam`: all but diff softmax, whose comes from the rowdot kernel).
template <bool kTwo>
__global__ void __launch_bounds__(kThreads) fa_zero_dq_kernel(BwdArgs a, size_t sqk, bool lam) {
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const size_t r = size_t(blockIdx.x) * kWarps + warp;
  if (r >= size_t(a.B) * a.H * a.T) return;
  const size_t at = (r / a.T) * sqk + (r % a.T) * size_t(a.Dqk);
  for (int d = lane; d < a.Dqk; d += kWarp) {
    a.dq[at + d] = 0.f;
    if (kTwo) a.dq2[at + d] = 0.f;
  }
  if (lane == 0 && a.drow_tau) a.drow_tau[r] = 0.f;
  if (lane == 0 && lam && a.drow_lambda) a.drow_lambda[r] = 0.f;
}

// The atomic dk/dv kernel, after a half's gradient pass: the warp's ds (transposed: rows its 16
// keys, columns the half's 32 queries, from query xh of the tile) into sds1 (sds2) as rows per
// query, in bf16 (the bits mma_acc would round them to), for dq_atomic; and per query column the
// sums over the warp's keys of drow_tau = -(dtau_scale / ds_scale) sum_j (ds1 + ds2)_ij (ds is
// ds_scale d, or ds_f u = clipped_slope(ds_scale) u where dtau is clipped_slope(dtau_scale) u: the
// same ratio) and of drow_lambda's terms (kLam; dl: this lane's sums per column), added to the
// rows by atomics. row0: the tile's first query row (bh T + i0); n_rows: its rows before T.
template <bool kTwo, bool kLam>
__device__ inline void store_ds_rows(const BwdArgs& a, const float (*s1)[4], const float (*s2)[4],
                                     const float (*dl)[2], uint16_t* sds1, uint16_t* sds2, int xh,
                                     size_t row0, int n_rows, int warp, int lane) {
  TDA_UNROLL
  for (int nt = 0; nt < 4; ++nt) TDA_UNROLL
  for (int c = 0; c < 4; ++c) {
    const int at = (xh + acc_col(lane, nt, c)) * ld<kTile>() + 16 * warp + acc_row(lane, c);
    sds1[at] = bf16_bits(s1[nt][c]);
    if (kTwo) sds2[at] = bf16_bits(s2[nt][c]);
  }
  if (!a.drow_tau && !(kLam && a.drow_lambda)) return;  // uniform
  const float to_tau = -a.dtau_scale / a.ds_scale;
  TDA_UNROLL
  for (int nt = 0; nt < 4; ++nt) TDA_UNROLL
  for (int c = 0; c < 2; ++c) {  // column acc_col(lane, nt, c): rows g (c) and g + 8 (c + 2)
    float t = s1[nt][c] + s1[nt][c + 2], l = kLam ? dl[nt][c] : 0.f;
    if (kTwo) t += s2[nt][c] + s2[nt][c + 2];
    TDA_UNROLL
    for (int m = 4; m < kWarp; m *= 2) {  // over the 8 lanes of the column (lane bits 2-4)
      t += __shfl_xor_sync(0xffffffffu, t, m);
      if (kLam) l += __shfl_xor_sync(0xffffffffu, l, m);
    }
    const int x = xh + acc_col(lane, nt, c);
    if (lane >= 4 || x >= n_rows) continue;
    if (a.drow_tau) atomicAdd(a.drow_tau + row0 + x, to_tau * t);
    if (kLam && a.drow_lambda) atomicAdd(a.drow_lambda + row0 + x, l);
  }
}

// The atomic dk/dv kernel, after a tile's two halves, for one view: dq_i += sum_j ds_ij k_j for
// the tile's 64 queries (warp w: queries 16w ... 16w + 15, 32 accumulators), ds from sds (A, a row
// per query) and k from the key tile sk (B, k-major as V in O = W V), added to dq at base + x Dqk
// (x: the query within the tile, below n_rows) by fp32 atomics.
template <int kDk>
__device__ inline void dq_atomic(const BwdArgs& a, const uint16_t* sds, const uint16_t* sk,
                                 float* dq, size_t base, int n_rows, int warp, int lane) {
  float acc[kDk / 8][4] = {};
  TDA_UNROLL
  for (int kc = 0; kc < kTile / 16; ++kc) {
    uint32_t af[4];
    frag_a(af, sds + 16 * warp * ld<kTile>() + 16 * kc, ld<kTile>(), lane);
    TDA_UNROLL
    for (int n = 0; n < kDk / 8; n += 2) {
      uint32_t b[4];
      frag_b2_kmajor(b, sk + 16 * kc * ld<kDk>() + 8 * n, ld<kDk>(), lane);
      mma_m16n8k16_bf16(acc[n], af, b, acc[n]);
      mma_m16n8k16_bf16(acc[n + 1], af, b + 2, acc[n + 1]);
    }
  }
  TDA_UNROLL
  for (int h = 0; h < 2; ++h) {
    const int x = 16 * warp + acc_row(lane, 2 * h);
    if (x >= n_rows) continue;
    float* row = dq + base + size_t(x) * a.Dqk;
    TDA_UNROLL
    for (int n = 0; n < kDk / 8; ++n) TDA_UNROLL
    for (int c = 0; c < 2; ++c) {
      const int d = 8 * n + 2 * (lane & 3) + c;
      if (d < a.Dqk) atomicAdd(row + d, acc[n][2 * h + c]);
    }
  }
}

// dk, dv per key tile. The 64 queries of a tile are taken in two halves of 32 (transposed score
// tiles of 16 keys x 32 queries per warp): with dk1, dk2 and dv accumulators live, full 64-wide
// tiles would not fit in 255 registers. kStages: query tiles (Q, Q2, dO) in flight, 1 or 2
// (attention.bwd_stages; FlashAttention-2's double buffer): with 2, tile i + 1 is copied into the
// other buffers while tile i is computed, so no tile waits for its own copy.
template <class P, bool kTwo, int kDk, int kDv, bool kAtomic, int kStages>
__global__ void __launch_bounds__(kThreads)
    fa_dkdv_kernel(BwdArgs a, AttnBf16Operands in, size_t sqk, const float* Dbuf) {
  static_assert(kStages == 1 || kStages == 2, "one or two query tiles in flight");
  constexpr int kNk = kDk / 8, kNv = kDv / 8, kHalf = kTile / 2, nst = n_stats<P, kTwo>();
  // The threshold kinds' scores shifted to r = s - tau_i (shifts_scores), but at Dv 64 only: at
  // 128 (diff_rela's bucket) the shift's registers made ptxas spill (24 bytes, sm_80 and sm_90).
  constexpr bool kShift = shifts_scores<P>() && kDv == 64;
  // Then at p = 2 the weight pass leaves m = max(r, 0) in s1, s2 for the gradient pass.
  constexpr bool kClip = kShift && clips_scores<P>();
  // Shared memory: K (K2), V and the query tiles' Q (Q2), dO, in bf16. With 2 stages the query
  // tiles' buffers are contiguous, [Q, Q2, dO] twice, kRing apart, so a tile's stage is one offset.
  constexpr int kEk = tile_elems<kDk>(), kEv = tile_elems<kDv>(), kE2 = kTwo ? kEk : 0;
  constexpr int kRing = kEk + kE2 + kEv;
  constexpr bool kOne = kStages == 1;
  TDA_DYNAMIC_SHARED(uint16_t, smem);
  uint16_t* sk = smem;
  uint16_t* sq = sk + (kOne ? kEk : kEk + kE2 + kEv);
  uint16_t* sk2 = kOne ? sq + kEk : sk + kEk;  // two views only
  uint16_t* sq2 = kOne ? sk2 + kE2 : sq + kEk;
  uint16_t* sv = kOne ? sq2 + kE2 : sk2 + kE2;
  uint16_t* sg = kOne ? sv + kEv : sq2 + kE2;
  // per query of the current tile: stats 1 and 2, tau, D1, D2 (fp32)
  float* rowf = reinterpret_cast<float*>(sg + kEv + (kStages - 1) * kRing);
  // kAtomic: the (query tile x key tile) dS of each view in bf16, a row per query (dq's A operand)
  uint16_t* sds1 = reinterpret_cast<uint16_t*>(rowf + 5 * kTile);
  uint16_t* sds2 = sds1 + tile_elems<kTile>();  // two views only
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int T = a.T, Dk = a.Dqk, Dv = a.Dv;
  size_t bh;
  if (!block_bh(a, &bh)) return;  // past B*H: the rounding of a (y, z)-split grid
  const int j0 = int(blockIdx.x) * kTile;
  const size_t bqk = bh * size_t(T) * kDk, bv = bh * size_t(T) * kDv;
  load_tile_async<kDk>(sk, in.k + bqk, j0, T);
  load_tile_async<kDv>(sv, in.v + bv, j0, T);
  if (kTwo) load_tile_async<kDk>(sk2, in.k2 + bqk, j0, T);
  cp_async_commit();  // waited for with the first Q tile
  // Query tile i0's copies into stage st: two groups, Q (Q2), then dO, so that the sparse kinds
  // test a pair's liveness while dO is still on its way.
  auto load_q = [&](int i0, int st) {
    const int off = st * kRing;
    load_tile_async<kDk>(sq + off, in.q + bqk, i0, T);
    if (kTwo) load_tile_async<kDk>(sq2 + off, in.q2 + bqk, i0, T);
    cp_async_commit();
    load_tile_async<kDv>(sg + off, in.g + bv, i0, T);
    cp_async_commit();
  };
  // Groups committed after a tile's dO: with 2 stages, the next tile's two (empty past the last).
  constexpr int kAhead = 2 * (kStages - 1);
  if constexpr (kStages == 2) load_q(j0, 0);
  int key[2];  // this lane's two keys (accumulator rows g and g + 8)
  TDA_UNROLL
  for (int h = 0; h < 2; ++h) key[h] = j0 + 16 * warp + (lane >> 2) + 8 * h;
  float dk1[kNk][4], dk2[kTwo ? kNk : 1][4], dv[kNv][4];
  TDA_UNROLL
  for (int n = 0; n < kNk; ++n) TDA_UNROLL
  for (int c = 0; c < 4; ++c) dk1[n][c] = dk2[kTwo ? n : 0][c] = 0.f;
  TDA_UNROLL
  for (int n = 0; n < kNv; ++n) TDA_UNROLL
  for (int c = 0; c < 4; ++c) dv[n][c] = 0.f;

  const float ds_f = clipped_slope<P>(a.ds_scale);  // the clipped gradient pass's

  // cp.async tiles: for the sparse kinds dO(i) is copied while the pair's liveness is computed.
  // Masked tiles: the diagonal one (i0 = j0, the first) and one reaching past T (the last); the
  // tiles between them are whole and strictly below the diagonal, so every (i, j) is valid there.
  // With 2 stages, the n-th query tile of the block (i0 = j0 + 64 n) is in stage n % 2.
  auto tile = [&](const int i0, auto masked) {
    constexpr bool kMasked = decltype(masked)::value;
    auto ok = [&](int h, int i) { return !kMasked || (key[h] <= i && i < T); };
    const uint16_t *tq = sq, *tq2 = sq2, *tg = sg;  // this tile's Q, Q2, dO
    __syncthreads();  // nobody reads the previous tile's buffers any more
    if constexpr (kStages == 1) {
      load_tile_async<kDk>(sq, in.q + bqk, i0, T);
      if (kTwo) load_tile_async<kDk>(sq2, in.q2 + bqk, i0, T);
      cp_async_commit();
      load_tile_async<kDv>(sg, in.g + bv, i0, T);
      cp_async_commit();
    } else {
      const int st = ((i0 - j0) / kTile) & 1, off = st * kRing;
      tq += off, tq2 += off, tg += off;
      if (i0 + kTile < T) {
        load_q(i0 + kTile, st ^ 1);  // into the previous tile's stage
      } else {
        cp_async_commit();  // two empty groups: the waits below count the same groups
        cp_async_commit();
      }
    }
    static_assert(kThreads >= kTile, "one row per thread");
    if (const int x = threadIdx.x; x < kTile) {
      const bool in = i0 + x < T;
      const size_t r = bh * T + (in ? i0 + x : 0);
      row_tau_stat<P, kTwo>(a, r, i0 + x, in, &rowf[2 * kTile + x], &rowf[x]);
      rowf[x] *= score_frame<P>();  // the saved statistics in the scores' frame
      rowf[kTile + x] = (kTwo && nst >= 2 && in) ? a.stats[r * nst + 1] * score_frame<P>() : 0.f;
      rowf[3 * kTile + x] = (P::kNormalized && in) ? Dbuf[2 * r] : 0.f;
      rowf[4 * kTile + x] = (P::kNormalized && in) ? Dbuf[2 * r + 1] : 0.f;
    }
    if (P::kSparse)
      cp_async_wait<1 + kAhead>();  // all but dO(i) and the next tile's
    else
      cp_async_wait<kAhead>();
    __syncthreads();
    // Liveness of the whole (query tile, key tile) pair first, as in the forward (same skips).
    bool alive = false;
    for (int half = 0; half < 2 && P::kSparse && !a.no_skip; ++half) {
      float s1[4][4], s2[kTwo ? 4 : 1][4];
      mma_rows<kDk, 4>(s1, sk + 16 * warp * ld<kDk>(), tq + half * kHalf * ld<kDk>(), lane);
      if (kTwo)
        mma_rows<kDk, 4>(s2, sk2 + 16 * warp * ld<kDk>(), tq2 + half * kHalf * ld<kDk>(), lane);
      TDA_UNROLL
      for (int nt = 0; nt < 4; ++nt) TDA_UNROLL
      for (int c = 0; c < 4; ++c) {
        const int x = half * kHalf + acc_col(lane, nt, c), i = i0 + x;
        // fmaxf and & rather than || and &&: no branch per score (scale_rows_alive); the
        // threshold kinds test r = s - tau > 0, the r their weights read below
        const float tau = rowf[2 * kTile + x], shift = kShift ? -tau : 0.f;
        float v = kShift ? fmaf(s1[nt][c], a.score_scale, shift) : a.score_scale * s1[nt][c];
        if constexpr (kTwo)
          v = fmaxf(v, kShift ? fmaf(s2[nt][c], a.score_scale, shift) : a.score_scale * s2[nt][c]);
        alive = alive | (ok(c >> 1, i) & (v > (kShift ? 0.f : tau)));
      }
    }
    if (P::kSparse && !a.no_skip && !__syncthreads_or(alive)) {
      cp_async_wait<kAhead>();  // dO(i) lands before its buffer is refilled
      return;
    }
    if (P::kSparse) {
      cp_async_wait<kAhead>();
      __syncthreads();  // dO(i) has landed
    }
    for (int half = 0; half < 2; ++half) {
      const int xh = half * kHalf;
      // transposed tiles: rows are this warp's 16 keys, columns 32 queries
      float s1[4][4], s2[kTwo ? 4 : 1][4], w[4][4];
      mma_rows<kDk, 4>(s1, sk + 16 * warp * ld<kDk>(), tq + xh * ld<kDk>(), lane);
      if (kTwo) mma_rows<kDk, 4>(s2, sk2 + 16 * warp * ld<kDk>(), tq2 + xh * ld<kDk>(), lane);
      // dv += W^T dO first, so that W is dead before e is computed (register pressure)
      TDA_UNROLL
      for (int nt = 0; nt < 4; ++nt) TDA_UNROLL
      for (int c = 0; c < 4; ++c) {
        const int x = xh + acc_col(lane, nt, c), i = i0 + x;
        // softmax keeps its scores raw; the threshold kinds shift them: r = s - tau_i, tau 0
        const float tau = kShift ? 0.f : rowf[2 * kTile + x];
        if constexpr (kShift) {
          const float shift = -rowf[2 * kTile + x];
          s1[nt][c] = fmaf(s1[nt][c], a.score_scale, shift);
          if (kTwo) s2[nt][c] = fmaf(s2[nt][c], a.score_scale, shift);
        } else {
          if constexpr (!folds_scale<P, kTwo>()) s1[nt][c] *= a.score_scale;
          if (kTwo) s2[nt][c] *= a.score_scale;
        }
        if constexpr (kClip) {  // masked: m = 0, hence a = 0 and, below, ds = 0
          const bool on = ok(c >> 1, i);
          s1[nt][c] = on ? fmaxf(s1[nt][c], 0.f) : 0.f;
          if (kTwo) s2[nt][c] = on ? fmaxf(s2[nt][c], 0.f) : 0.f;
          w[nt][c] = P::weight_clipped(s1[nt][c]) -
                     (kTwo ? *a.lambda * P::weight_clipped(s2[nt][c]) : 0.f);
          continue;
        }
        float a1 = 0.f, a2 = 0.f, f;
        if (ok(c >> 1, i)) {
          if constexpr (folds_scale<P, kTwo>())
            P::bwd_raw(s1[nt][c], a.score_scale, rowf[x], &a1, &f);
          else
            P::bwd(s1[nt][c], rowf[x], tau, P::param(a), &a1, &f);
          if (kTwo) P::bwd(s2[nt][c], rowf[kTile + x], tau, P::param(a), &a2, &f);
        }
        w[nt][c] = a1 - (kTwo ? *a.lambda : 0.f) * a2;
      }
      mma_acc<kDv, 4>(dv, w, tg + xh * ld<kDv>(), lane);
      float e[4][4];
      mma_rows<kDv, 4>(e, sv + 16 * warp * ld<kDv>(), tg + xh * ld<kDv>(), lane);  // v_j.g_i
      // kAtomic: dL/dlambda's terms -e a2 (rectifier views; the deterministic split sums them in
      // dq's kernel), summed per query column (acc_col(lane, nt, c), c < 2) over this lane's keys
      float dl[4][2] = {};
      TDA_UNROLL
      for (int nt = 0; nt < 4; ++nt) TDA_UNROLL
      for (int c = 0; c < 4; ++c) {
        const int x = xh + acc_col(lane, nt, c), i = i0 + x;
        float ds1 = 0.f, ds2 = 0.f, dlam = 0.f;
        if constexpr (kClip) {  // grad_entry_clipped's ds, from m (dtau, dlam are dq's)
          if (ok(c >> 1, i)) {
            ds1 = ds_f * (s1[nt][c] * e[nt][c]);
            if (kTwo) ds2 = ds_f * (s2[nt][c] * (-*a.lambda * e[nt][c]));
            if (kAtomic && kTwo) dlam = -(e[nt][c] * P::weight_clipped(s2[nt][c]));
          }
        } else if (ok(c >> 1, i)) {
          float dtau = 0.f;  // dq's
          grad_entry<P, kTwo>(a, s1[nt][c], kTwo ? s2[nt][c] : 0.f, e[nt][c], rowf[x],
                              rowf[kTile + x], kShift ? 0.f : rowf[2 * kTile + x],
                              rowf[3 * kTile + x], rowf[4 * kTile + x], &ds1, &ds2, &dtau, &dlam);
        }
        s1[nt][c] = ds1;
        if (kTwo) s2[nt][c] = ds2;
        dl[nt][c & 1] += dlam;
      }
      if constexpr (kAtomic)
        store_ds_rows<kTwo, kTwo && !P::kNormalized>(a, s1, s2, dl, sds1, sds2, xh, bh * T + i0,
                                                     T - i0, warp, lane);
      mma_acc<kDk, 4>(dk1, s1, tq + xh * ld<kDk>(), lane);  // dk += dS^T Q
      if (kTwo) mma_acc<kDk, 4>(dk2, s2, tq2 + xh * ld<kDk>(), lane);
    }
    if constexpr (kAtomic) {
      __syncthreads();  // every warp's dS is in sds1 (sds2)
      const size_t base = bh * sqk + size_t(i0) * Dk;
      dq_atomic<kDk>(a, sds1, sk, a.dq, base, T - i0, warp, lane);
      if (kTwo) dq_atomic<kDk>(a, sds2, sk2, a.dq2, base, T - i0, warp, lane);
    }
  };
  // In order of i0 (the sums' order): the diagonal tile, the whole ones, a last one past T.
  tile(j0, std::true_type{});
  int i0 = j0 + kTile;
  for (; i0 + kTile <= T; i0 += kTile) tile(i0, std::false_type{});
  if (i0 < T) tile(i0, std::true_type{});

  TDA_UNROLL
  for (int h = 0; h < 2; ++h) {
    if (key[h] >= T) continue;
    float* dk1r = a.dk + bh * sqk + size_t(key[h]) * Dk;
    float* dk2r = kTwo ? a.dk2 + bh * sqk + size_t(key[h]) * Dk : nullptr;
    float* dvr = a.dv + (bh * T + key[h]) * size_t(Dv);
    TDA_UNROLL
    for (int n = 0; n < kNk; ++n) TDA_UNROLL
    for (int c = 0; c < 2; ++c) {
      const int d = 8 * n + 2 * (lane & 3) + c;
      if (d >= Dk) continue;
      dk1r[d] = dk1[n][2 * h + c];
      if (kTwo) dk2r[d] = dk2[n][2 * h + c];
    }
    TDA_UNROLL
    for (int n = 0; n < kNv; ++n) TDA_UNROLL
    for (int c = 0; c < 2; ++c) {
      const int d = 8 * n + 2 * (lane & 3) + c;
      if (d < Dv) dvr[d] = dv[n][2 * h + c];
    }
  }
}

// The dk/dv kernel's dynamic shared memory: K (K2), V, a query tile of Q (Q2) and dO, the rows'
// statistics, for the single kernel its dS tiles, and with 2 stages a second query tile.
template <bool kTwo, int kDk, int kDv>
size_t dkdv_smem(int stages, bool atomic) {
  const size_t tile = (kTwo ? 2 : 1) * tile_elems<kDk>() + tile_elems<kDv>();
  const size_t ds = atomic ? (kTwo ? 2 : 1) * tile_elems<kTile>() : 0;
  return (tile * (1 + size_t(stages)) + ds) * sizeof(uint16_t) + 5 * kTile * sizeof(float);
}

template <class P, bool kTwo, int kDk, int kDv, bool kAtomic, int kStages>
void launch_dkdv(const dim3& grid, const BwdArgs& ka, const AttnBf16Operands& in, size_t sqk,
                 const float* Dbuf) {
  constexpr auto* k = fa_dkdv_kernel<P, kTwo, kDk, kDv, kAtomic, kStages>;
  const size_t smem = dkdv_smem<kTwo, kDk, kDv>(kStages, kAtomic);
  check(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
        "attention_backward smem");
  check(launch<k>(grid, dim3(kThreads), smem, stream(), ka, in, sqk, Dbuf),
        kAtomic ? "attention_backward dkdv+dq" : "attention_backward dkdv");
}

template <class P, bool kTwo, int kDk, int kDv>
void launch_backward(const AttnArgs& a, const AttnBf16Operands& in, float* Dbuf, bool drop_term) {
  BwdArgs ka;
  set_bwd_args<P>(&ka, a, drop_term);
  const size_t sqk = qk_stride(a);
  const dim3 grid = tile_grid(a, "attention_backward");
  const float* D = Dbuf;
  // The (64, 64) bucket, the d12 head dims, is where the tuned shapes are built: FlashAttention-2's
  // single kernel (fa_zero_dq_kernel; attn_backward_atomic: entmax at alpha 1.5 only, through
  // Entmax15Policy; the other buckets spilled 4-176 bytes with it, docs/cuda.md) and two query
  // tiles in flight (attn_backward_stages).
  if constexpr (kDk == 64 && kDv == 64) {
    const bool two = attn_backward_stages(a) == 2;
    if (attn_backward_atomic(a)) {
      const size_t rows = size_t(a.B) * a.H * a.T;
      check(launch<fa_zero_dq_kernel<kTwo>>(dim3(unsigned((rows + kWarps - 1) / kWarps)),
                                            dim3(kThreads), 0, stream(), ka, sqk,
                                            !(kTwo && P::kNormalized)),
            "attention_backward zero dq");
      using Q = std::conditional_t<P::kStatTau, Entmax15Policy, P>;
      if constexpr (!P::kStatTau) {  // entmax's keeps one stage (attn_backward_stages)
        if (two) return launch_dkdv<Q, kTwo, kDk, kDv, true, 2>(grid, ka, in, sqk, D);
      }
      launch_dkdv<Q, kTwo, kDk, kDv, true, 1>(grid, ka, in, sqk, D);
      return;
    }
  }
  const size_t tiles =
      (size_t(kTwo ? 4 : 2) * tile_elems<kDk>() + 2 * tile_elems<kDv>()) * sizeof(uint16_t);
  constexpr auto* dq = fa_dq_kernel<P, kTwo, kDk, kDv>;
  check(cudaFuncSetAttribute(dq, cudaFuncAttributeMaxDynamicSharedMemorySize, int(tiles)),
        "attention_backward smem");
  check(launch<dq>(grid, dim3(kThreads), tiles, stream(), ka, in, sqk, D), "attention_backward dq");
  if constexpr (kDk == 64 && kDv == 64) {
    if (attn_backward_stages(a) == 2)
      return launch_dkdv<P, kTwo, kDk, kDv, false, 2>(grid, ka, in, sqk, D);
  }
  launch_dkdv<P, kTwo, kDk, kDv, false, 1>(grid, ka, in, sqk, D);
}

template <class P, bool kTwo>
void launch_backward(const AttnArgs& a, const AttnBf16Operands& in, float* Dbuf, bool drop_term) {
  if constexpr (P::kStatTau) {
    attention_entmax_rowc(a, in, Dbuf, drop_term);  // D_i = c_i, a pass over the keys
  } else if (P::kNormalized) {
    const size_t rows = size_t(a.B) * a.H * a.T;
    check(launch<fa_rowdot_kernel<kTwo>>(dim3(unsigned((rows + kWarps - 1) / kWarps)),
                                         dim3(kThreads), 0, stream(), a, Dbuf, drop_term),
          "attention_backward rowdot");
  }
  with_head_dim_bucket<kTwo>(a, [&](auto dk, auto dv) {
    launch_backward<P, kTwo, decltype(dk)::value, decltype(dv)::value>(a, in, Dbuf, drop_term);
  });
}

void backward_math(const AttnArgs& a, const AttnBf16Operands& in, float* Dbuf, bool drop_term) {
  using namespace tda::attn;
  switch (a.math) {
    case AttnMath::kSoftmax:
      return launch_backward<SoftmaxExp2Policy, false>(a, in, Dbuf, drop_term);
    case AttnMath::kSoftplus:
      return launch_backward<SoftplusPolicy, false>(a, in, Dbuf, drop_term);
    case AttnMath::kRelu:
    case AttnMath::kThreshold:
      return with_threshold_policy(
          a.power, [&](auto p) { launch_backward<decltype(p), false>(a, in, Dbuf, drop_term); });
    case AttnMath::kEntmax:
      return launch_backward<EntmaxPolicy, false>(a, in, Dbuf, drop_term);
    case AttnMath::kDiffSoftmax:
      return launch_backward<SoftmaxExp2Policy, true>(a, in, Dbuf, drop_term);
    case AttnMath::kDiffRelu:
    case AttnMath::kDiffThreshold:
      return with_threshold_policy(
          a.power, [&](auto p) { launch_backward<decltype(p), true>(a, in, Dbuf, drop_term); });
    default:
      throw Error("cuda attention: math not served by the tiled backward");
  }
}
}  // namespace

void attention_tiled_backward(const AttnArgs& a, float* scratch, uint16_t* operands,
                              bool drop_term) {
  if (size_t(a.B) * a.H * a.T == 0) return;
  backward_math(a, attention_bf16_operands(a, operands, /*with_dout=*/true), scratch, drop_term);
}

}  // namespace tda::cuda
