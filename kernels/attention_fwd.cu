// Streaming attention forward on tensor cores (FlashAttention-2 schedule) for every tiled
// mechanism, templated on the policies of attention/policies.h exactly as the CPU reference
// (src/backend/cpu/attention_stream.cpp). Per (b, h) and query block of 64 rows (one CUDA block,
// 16 rows per warp; kRT = 2: 128 rows, 32 per warp, attention.fwd_block_rows), key tiles of kBN
// = 64 keys (128: attention.fwd_block_keys) j0 = 0, kBN, ... up to the diagonal:
//   S = scale Q K^T            bf16 operands (rounded once per call into bf16 copies that the
//                              tiles are copied from by cp.async), fp32 accumulate
//   online-max policies:       m' = max(m, max_j s_ij), acc and l rescaled by exp(m - m')
//   w_ij = P::weight(s_ij)     j <= i only (causal), fp32; two views: w = w1 - lambda w2 for
//                              un-normalised kinds, separate accumulators for diff softmax
//   O += W V                   W rounded to bf16 (the A operand), fp32 accumulate
//   out_i = acc_i / Z_i        Z = P::norm over the row (merged over the 4 lanes of a quad)
// Sparse policies: a (query block, key tile) pair in which no causal weight of any row is
// non-zero in any view skips the W.V product (counted in tiles_skipped; every pair is counted in
// tiles_total, the CPU kernel's convention). Rows below q_start (KV-cache decoding) are not
// computed: their output is 0 and blocks wholly below it count no tiles. No T x T buffer, no float
// atomics (the counters are integer atomics). Survivors (non-zero weights per row, for the
// diagnostics) are counted only by the kCount instance, launched when a.survivors is set: in
// tda's forward the three counts per score were a sixth of the key loop's instructions.
#include <type_traits>

#include "backend/cuda/attention_tc.cuh"
#include "backend/cuda/common.h"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"

namespace tda::cuda {

namespace {
using namespace fa;

template <class P, bool kTwo, int kDk, int kDv, bool kCount, int kRT, int kBN>
__global__ void __launch_bounds__(kThreads) fa_forward_kernel(TileArgs a, AttnBf16Operands in) {
  static_assert(kRT == 1 || (kRT == 2 && !kTwo && !kCount), "32-row warps: one view, no counts");
  // 128-key tiles: 16-row warps, no counts (they are defined on 64 x 64 tiles), one accumulator
  static_assert(
      kBN == kTile || (kBN == 2 * kTile && kRT == 1 && !kCount && !(kTwo && P::kNormalized)),
      "128-key tiles: 16-row warps, no counts, one accumulator");
  constexpr int LD = ld<kDk>(), kN = kDv / 8, kBM = kTile * kRT, kNT = kBN / 8, kKT = kBN / kTile;
  constexpr bool kTwoAcc = kTwo && P::kNormalized;  // diff softmax: one accumulator per view
  TDA_DYNAMIC_SHARED(uint16_t, smem);
  uint16_t* sq = smem;                           // kBM rows
  uint16_t* sk = sq + kRT * tile_elems<kDk>();   // kBN rows, as sk2 and sv
  uint16_t* sq2 = sk + kKT * tile_elems<kDk>();  // two views only
  uint16_t* sk2 = sq2 + (kTwo ? tile_elems<kDk>() : 0);
  uint16_t* sv = sk2 + (kTwo ? kKT * tile_elems<kDk>() : 0);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int T = a.T, Dv = a.Dv;
  size_t bh;
  if (!block_bh(a, &bh)) return;  // past B*H: the rounding of a (y, z)-split grid
  const int i0 = int(blockIdx.x) * kBM, i1 = min(T, i0 + kBM), qs = a.q_start;
  if (i0 + kBM <=
      qs) {  // KV-cache decoding: a block of rows below q_start is not computed (output 0)
    for (int x = threadIdx.x; x < (i1 - i0) * Dv; x += kThreads) {
      a.out[(bh * T + i0) * Dv + x] = 0.f;
      if (kTwoAcc) a.out2[(bh * T + i0) * Dv + x] = 0.f;
    }
    return;
  }
  // Loads overlap the math (FlashAttention-2's forward): V(j) is copied while S = Q K(j)^T and
  // the weights are computed, K(j + 1) while W V(j) is. One buffer per operand; each wait below
  // is for all of this thread's copies, and the barrier after it for everyone's, which is also
  // what frees the other operand's buffer for its refill.
  const size_t bqk = bh * size_t(T) * kDk, bv = bh * size_t(T) * kDv;
  // K is copied with no row test (kAnyRow): only the diagonal tiles reach past T, and there every
  // key past T is masked (ok() below), its score neither in a max nor weighed. V keeps the test on
  // the diagonal tiles: a weight of 0 times an unfilled row could be 0 x NaN.
  auto load_k = [&](int j0) {
    load_tile_async<kDk, true, kBN>(sk, in.k + bqk, j0, T);
    if (kTwo) load_tile_async<kDk, true, kBN>(sk2, in.k2 + bqk, j0, T);
    cp_async_commit();
  };
  load_tile_async<kDk>(sq, in.q + bqk, i0, T);
  if constexpr (kRT == 2) {
    // Rows i0 + 64 ... of a block whose second half starts past T are zero-filled at the first
    // half's addresses: they stay inside the operand buffer's tile of padding.
    const bool half2 = i0 + kTile < T;
    load_tile_async<kDk>(sq + tile_elems<kDk>(), in.q + bqk, half2 ? i0 + kTile : i0,
                         half2 ? T : 0);
  }
  if (kTwo) load_tile_async<kDk>(sq2, in.q2 + bqk, i0, T);
  load_k(0);  // one group: Q (Q2) and the first K (K2)

  // This lane's query rows: per row tile rt (16 rows of the warp's 16 kRT), accumulator rows g
  // and g + 8.
  int row[kRT][2];
  float tau[kRT][2];
  typename P::Row st1[kRT][2], st2[kRT][2];
  TDA_UNROLL
  for (int rt = 0; rt < kRT; ++rt) TDA_UNROLL
  for (int h = 0; h < 2; ++h) {
    row[rt][h] = i0 + 16 * (kRT * warp + rt) + (lane >> 2) + 8 * h;
    const bool in = row[rt][h] < T;
    float st;
    row_tau_stat<P, kTwo>(a, bh * T + (in ? row[rt][h] : 0), row[rt][h], in, &tau[rt][h], &st);
    if constexpr (P::kStatTau) st1[rt][h].norm = st;  // entmax: norm_i from the pre-pass
  }
  float acc1[kRT][kN][4], acc2[kTwoAcc ? kN : 1][4], surv[3][2] = {};
  TDA_UNROLL
  for (int rt = 0; rt < kRT; ++rt) TDA_UNROLL
  for (int n = 0; n < kN; ++n) TDA_UNROLL
  for (int c = 0; c < 4; ++c) acc1[rt][n][c] = acc2[kTwoAcc ? n : 0][c] = 0.f;
  long long n_total = 0, n_skipped = 0;

  // valid(i, j) = j <= i, i in [q_start, T). Only the diagonal tiles (j0 + kBN > i0, the last one
  // or two) test j <= i: the tiles before them, FlashAttention-2's steady-state loop, weigh every
  // score, the rows past T or below q_start included (their scores are finite and their results
  // never written), and test only the row, for the tile skip. A valid row's arithmetic is the
  // same as with the test. With kRT = 2 the second diagonal tile is wholly masked for warps 0
  // and 1: their weights there are 0 and their online max does not move.
  bool row_ok[kRT][2];
  TDA_UNROLL
  for (int rt = 0; rt < kRT; ++rt) TDA_UNROLL
  for (int h = 0; h < 2; ++h) row_ok[rt][h] = row[rt][h] < T && row[rt][h] >= qs;
  auto tile = [&](const int j0, auto diagonal) {
    constexpr bool kDiag = decltype(diagonal)::value;
    const bool more = j0 + kBN < i1;
    cp_async_wait<0>();
    __syncthreads();  // K(j) has landed; nobody reads V(j - 1) any more
    load_tile_async<kDv, !kDiag, kBN>(sv, in.v + bv, j0, T);  // no row test before the diagonal
    cp_async_commit();
    // recomputed where needed (an 8x4 predicate array costs registers the two-accumulator kinds
    // do not have)
    auto ok = [&](int rt, int nt, int c) {
      return !kDiag || (j0 + acc_col(lane, nt, c) <= row[rt][c >> 1] && row_ok[rt][c >> 1]);
    };
    ++n_total;
    if constexpr (kTwoAcc) {
      // Diff softmax: view 1 is consumed (O1 += W1 V) before view 2's scores exist, so only one
      // 64-wide score tile is live next to the two accumulators (no spills at Dv = 128). The
      // both-views survivor count keeps view 1's non-zero weights as a 32-bit mask.
      float sc[8][4];
      unsigned nz1 = 0;
      TDA_UNROLL
      for (int view = 0; view < 2; ++view) {
        typename P::Row(&st)[2] = view == 0 ? st1[0] : st2[0];  // a constant once unrolled
        mma_rows<kDk, 8, true>(sc, (view == 0 ? sq : sq2) + 16 * warp * LD, view == 0 ? sk : sk2,
                               lane, a.Dqk);
        TDA_UNROLL
        for (int h = 0; h < 2; ++h) {
          float mx = -INFINITY;
          TDA_UNROLL
          for (int nt = 0; nt < 8; ++nt) TDA_UNROLL
          for (int c = 2 * h; c < 2 * h + 2; ++c) {
            sc[nt][c] *= a.score_scale;
            if (ok(0, nt, c)) mx = fmaxf(mx, sc[nt][c]);
          }
          const float f = P::rebase(st[h], quad_max(mx));
          TDA_UNROLL
          for (int n = 0; n < kN; ++n) {
            if (view == 0)
              acc1[0][n][2 * h] *= f, acc1[0][n][2 * h + 1] *= f;
            else
              acc2[n][2 * h] *= f, acc2[n][2 * h + 1] *= f;
          }
        }
        TDA_UNROLL
        for (int nt = 0; nt < 8; ++nt) TDA_UNROLL
        for (int c = 0; c < 4; ++c) {
          const int h = c >> 1;
          if (!ok(0, nt, c)) {
            sc[nt][c] = 0.f;
            continue;
          }
          const float w = P::weight(st[h], sc[nt][c], tau[0][h], P::param(a));
          P::add(st[h], w);
          if (kCount) {
            surv[view][h] += (w != 0.f);
            const unsigned bit = 1u << (4 * nt + c);
            if (view == 0 && w != 0.f) nz1 |= bit;
            if (view == 1) surv[2][h] += ((nz1 & bit) != 0 && w != 0.f);
          }
          sc[nt][c] = w;
        }
        if (view == 0) {
          cp_async_wait<0>();
          __syncthreads();  // V(j) has landed
          mma_acc<kDv, 8, true>(acc1[0], sc, sv, lane, Dv);
        } else {
          mma_acc<kDv, 8, true>(acc2, sc, sv, lane, Dv);  // the same V tile
        }
      }
      if (more) {
        __syncthreads();  // view 2 has read K2(j)
        load_k(j0 + kTile);
      }
      return;
    }
    float s1[kRT][kNT][4], s2[kTwo ? kRT : 1][kTwo ? kNT : 1][4];
    (void)s2;  // read by two views, and by the liveness test of the kinds that skip tiles
    // the counting instance (diagnostics) keeps mma_rows' cut at D: straight-line, softplus's
    // spills (108 bytes, sm_80)
    mma_rows_rt<kDk, kNT, kRT, kCount>(s1, sq + 16 * kRT * warp * LD, sk, lane, a.Dqk);
    if constexpr (kTwo)
      mma_rows_rt<kDk, kNT, kRT, kCount>(s2, sq2 + 16 * warp * LD, sk2, lane, a.Dqk);
    // softmax keeps its scores raw (folds_scale): no liveness either, as it skips no tile
    constexpr bool kFold = folds_scale<P, kTwo>(), kShift = shifts_scores<P>();
    static_assert(!kFold || !(kTwo || P::kSparse), "one view, no tile skip");
    bool alive = true;
    if constexpr (!kFold) {
      alive = false;
      TDA_UNROLL
      for (int rt = 0; rt < kRT; ++rt)
        alive = alive | scale_rows_alive<kTwo, kDiag, kShift, kNT>(
                            s1[rt], s2[kTwo ? rt : 0], a.score_scale, tau[rt], row_ok[rt],
                            [&](int nt, int c) { return ok(rt, nt, c); });
    }
    // A tile whose every weight is exactly 0 adds nothing (sparse policies). The next K is copied
    // at one place for both outcomes: after a barrier that follows every S of K(j) (the vote's,
    // or the one that waits for V(j)).
    const bool live = !(P::kSparse && !a.no_skip && !__syncthreads_or(alive));
    if (live) {
      TDA_UNROLL
      for (int rt = 0; rt < kRT; ++rt) {
        if (P::kOnlineMax) {
          TDA_UNROLL
          for (int h = 0; h < 2; ++h) {
            float mx1 = -INFINITY;
            TDA_UNROLL
            for (int nt = 0; nt < kNT; ++nt) TDA_UNROLL
            for (int c = 2 * h; c < 2 * h + 2; ++c)
              if (ok(rt, nt, c)) mx1 = fmaxf(mx1, s1[rt][nt][c]);
            const float c1 =
                P::rebase(st1[rt][h], kFold ? quad_max(mx1) * a.score_scale : quad_max(mx1));
            TDA_UNROLL
            for (int n = 0; n < kN; ++n) acc1[rt][n][2 * h] *= c1, acc1[rt][n][2 * h + 1] *= c1;
          }
        }
        TDA_UNROLL
        for (int nt = 0; nt < kNT; ++nt) TDA_UNROLL
        for (int c = 0; c < 4; ++c) {
          const int h = c >> 1;
          if (!ok(rt, nt, c)) {
            s1[rt][nt][c] = 0.f;
            continue;
          }
          const float t = kShift ? 0.f : tau[rt][h];  // shifted scores: r = s - tau_i is in s1, s2
          float w1;
          if constexpr (kFold)
            w1 = P::weight_raw(st1[rt][h], s1[rt][nt][c], a.score_scale);
          else
            w1 = P::weight(st1[rt][h], s1[rt][nt][c], t, P::param(a));
          P::add(st1[rt][h], w1);
          if (kCount) surv[0][h] += (w1 != 0.f);
          s1[rt][nt][c] = w1;
          if constexpr (kTwo) {  // un-normalised two-view kinds: one accumulator of a1 - lambda a2
            const float w2 = P::weight(st2[rt][h], s2[rt][nt][c], t, P::param(a));
            P::add(st2[rt][h], w2);
            if (kCount) surv[1][h] += (w2 != 0.f), surv[2][h] += (w1 != 0.f && w2 != 0.f);
            s1[rt][nt][c] = w1 - *a.lambda * w2;  // a device scalar (ops.h), read where it is used
          }
        }
      }
      cp_async_wait<0>();
      __syncthreads();  // V(j) has landed; nobody reads K(j) any more
    } else {
      ++n_skipped;
    }
    if (more) load_k(j0 + kBN);
    if (live) mma_acc_rt<kDv, kNT, kRT, kCount>(acc1, s1, sv, lane, Dv);
  };
  if constexpr (kTwoAcc) {  // diff softmax: a second copy of its tile spills at Dv = 128
    for (int j0 = 0; j0 < i1; j0 += kTile) tile(j0, std::true_type{});
  } else {
    // The diagonal tiles start at jd (i0 itself but at 64 x 128, where i0 may be an odd multiple
    // of 64): one where a key tile spans the query block (i1 <= i0 + 64 <= jd + kBN), two at
    // 128 x 64.
    const int jd = i0 & ~(kBN - 1);
    for (int j0 = 0; j0 < jd; j0 += kBN) tile(j0, std::false_type{});
    if constexpr (kBN >= kBM)
      tile(jd, std::true_type{});
    else
      for (int j0 = jd; j0 < i1; j0 += kBN) tile(j0, std::true_type{});
  }

  constexpr int nst = n_stats<P, kTwo>();
  TDA_UNROLL
  for (int rt = 0; rt < kRT; ++rt) TDA_UNROLL
  for (int h = 0; h < 2; ++h) {
    quad_merge<P>(st1[rt][h]);
    if (kTwoAcc) quad_merge<P>(st2[rt][h]);
    TDA_UNROLL
    for (int s = 0; s < 3 && kCount; ++s) surv[s][h] = quad_sum(surv[s][h]);
    if (row[rt][h] >= T) continue;
    const size_t r = bh * T + row[rt][h];
    if (row[rt][h] < qs) {  // below q_start: output 0, stats and survivors untouched
      for (int d = 2 * (lane & 3); d < Dv; d += 8) TDA_UNROLL
      for (int c = 0; c < 2 && d + c < Dv; ++c) {
        a.out[r * Dv + d + c] = 0.f;
        if (kTwoAcc) a.out2[r * Dv + d + c] = 0.f;
      }
      continue;
    }
    const float inv1 = 1.f / P::norm(st1[rt][h]);
    const float inv2 = kTwoAcc ? 1.f / P::norm(st2[rt][h]) : 0.f;
    const float lam = kTwoAcc ? *a.lambda : 0.f;
    TDA_UNROLL
    for (int n = 0; n < kN; ++n) TDA_UNROLL
    for (int c = 0; c < 2; ++c) {
      const int d = 8 * n + 2 * (lane & 3) + c;
      if (d >= Dv) continue;
      if (kTwoAcc) {
        // out = A1 V - lambda A2 V;  out2 = A2 V (the backward needs D2 and dlambda)
        const float o2 = acc2[n][2 * h + c] * inv2;
        a.out2[r * Dv + d] = o2;
        a.out[r * Dv + d] = acc1[rt][n][2 * h + c] * inv1 - lam * o2;
      } else {
        a.out[r * Dv + d] = acc1[rt][n][2 * h + c] * inv1;
      }
    }
    if ((lane & 3) == 0) {
      if (nst >= 1 && !P::kStatTau) a.stats[r * nst] = P::stat(st1[rt][h]);
      if (nst >= 2 && !P::kStatTau) a.stats[r * nst + 1] = P::stat(st2[rt][h]);
      if (kCount) {
        const int ns = kTwo ? 3 : 1;
        TDA_UNROLL
        for (int s = 0; s < ns; ++s) a.survivors[r * ns + s] = surv[s][h];
      }
    }
  }
  if (threadIdx.x == 0) {  // every thread counted the same tiles
    if (a.tiles_total)
      atomicAdd(reinterpret_cast<unsigned long long*>(a.tiles_total), (unsigned long long)n_total);
    if (a.tiles_skipped)
      atomicAdd(reinterpret_cast<unsigned long long*>(a.tiles_skipped),
                (unsigned long long)n_skipped);
  }
}

template <class P, bool kTwo, int kDk, int kDv, bool kCount, int kRT, int kBN>
void launch_forward(const AttnArgs& a, const AttnBf16Operands& in) {
  // Q (kRT tiles), K, V (kBN rows each); Q2, K2 for two views
  constexpr int kKT = kBN / kTile;
  const size_t smem = (size_t(kRT + kKT + (kTwo ? 1 + kKT : 0)) * tile_elems<kDk>() +
                       size_t(kKT) * tile_elems<kDv>()) *
                      sizeof(uint16_t);
  constexpr auto* kernel = fa_forward_kernel<P, kTwo, kDk, kDv, kCount, kRT, kBN>;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
        "attention_forward smem");
  TileArgs ka;
  set_tile_args<P>(&ka, a);
  check(launch<kernel>(tile_grid(a, "attention_forward", kTile * kRT), dim3(kThreads), smem,
                       stream(), ka, in),
        "attention_forward");
}

template <class P, bool kTwo, int kDk, int kDv>
void launch_forward(const AttnArgs& a, const AttnBf16Operands& in) {
  const AttnFwdShape shape = attn_forward_shape(a);
  constexpr bool kWide = kDk == 64 && kDv == 64;  // what attn_forward_shape allows
  if (a.survivors) {
    launch_forward<P, kTwo, kDk, kDv, true, 1, kTile>(a, in);
  } else if (shape.rows == 2 * kTile) {
    if constexpr (kWide && !kTwo) launch_forward<P, kTwo, kDk, kDv, false, 2, kTile>(a, in);
  } else if (shape.keys == 2 * kTile) {
    if constexpr (kWide && !(kTwo && P::kNormalized))
      launch_forward<P, kTwo, kDk, kDv, false, 1, 2 * kTile>(a, in);
  } else {
    launch_forward<P, kTwo, kDk, kDv, false, 1, kTile>(a, in);
  }
}

template <class P, bool kTwo>
void launch_forward(const AttnArgs& a, const AttnBf16Operands& in) {
  with_head_dim_bucket<kTwo>(a, [&](auto dk, auto dv) {
    launch_forward<P, kTwo, decltype(dk)::value, decltype(dv)::value>(a, in);
  });
}

void forward_math(const AttnArgs& a, const AttnBf16Operands& in) {
  using namespace tda::attn;
  switch (a.math) {
    case AttnMath::kSoftmax:
      return launch_forward<SoftmaxExp2Policy, false>(a, in);
    case AttnMath::kSoftplus:
      return launch_forward<SoftplusPolicy, false>(a, in);
    case AttnMath::kRelu:
    case AttnMath::kThreshold:
      return with_threshold_policy(a.power,
                                   [&](auto p) { launch_forward<decltype(p), false>(a, in); });
    case AttnMath::kEntmax:
      attention_entmax_threshold(a, in);  // stats (tau_i, norm_i), then a thresholded forward
      return launch_forward<EntmaxPolicy, false>(a, in);
    case AttnMath::kDiffSoftmax:
      // expf, not ex2: with two accumulators of Dv = 128 live, ex2's form spills (36 bytes,
      // sm_80). The statistic saved is the same natural LSE, which the backward's ex2 reads.
      return launch_forward<SoftmaxPolicy, true>(a, in);
    case AttnMath::kDiffRelu:
    case AttnMath::kDiffThreshold:
      return with_threshold_policy(a.power,
                                   [&](auto p) { launch_forward<decltype(p), true>(a, in); });
    default:
      throw Error("cuda attention: math not served by the tiled forward");
  }
}
}  // namespace

void attention_tiled_forward(const AttnArgs& a, uint16_t* operands) {
  if (size_t(a.B) * a.H * a.T == 0) return;
  forward_math(a, attention_bf16_operands(a, operands, /*with_dout=*/false));
}

}  // namespace tda::cuda
