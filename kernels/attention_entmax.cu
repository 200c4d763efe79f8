// Causal alpha-entmax attention on tensor cores: the two row pre-passes that make entmax a policy
// of the tiled kernels (kernels/attention_fwd.cu, attention_bwd.cu with EntmaxPolicy). Like
// AdaSplash, the threshold is found by passes over the key tiles, recomputing the scores with the
// same mma as the forward each time (no T x T buffer, no per-row score buffer). A block owns 64
// query rows (4 warps of 16, the FlashAttention-2 layout of attention_tc.cuh); the key tiles of
// every pass stream through shared memory, copied by cp.async from the bf16 copies of q, k, v and
// dO that attention_fwd.cu / attention_bwd.cu made (attention_operands.cu). Reference:
// src/backend/cpu/attention_entmax.cpp.
//   am1 = alpha - 1;  u_j = am1 z_j = am1 scale q.k_j (j <= i);  m = max u;
//   f(tau) = sum_j [u_j - tau]_+^(1/am1) - 1  (1.5: squares)
//   entmax_bisect: bisection on [m - 1, m - (1/n)^am1] (f(lo) >= 0 >= f(hi)), `entmax_iters`
//   passes (the policies.h Entmax::bisect sequence); tau = last midpoint, norm = f(tau) + 1 (the
//   CPU's bisection solver)
//   exact (default, alpha 1.5 only): Halley's method from m - 1, each pass also giving the closed
//   form of the sort-based solver on its support S = {u > t},
//     tau = M - sqrt(max(1/k - (Q - M^2), 0)) (M, Q means of u, u^2 over S, k = |S|), norm = 1,
//   which is the threshold once S is its own support; usually a few passes (the kernel's comment).
//   threshold pre-pass (forward): stats (tau_i, norm_i); the tiled forward then computes
//     p_ij = [u_ij - tau_i]_+^(1/am1) / norm_i and o_i = sum_j p_ij v_j, skipping dead tiles.
//   c pre-pass (backward): e_ij = g_i.v_j (dO V^T, as the dq kernel computes it);
//     c_i = sum_j g_ij e_ij / sum_j g_ij with g = p^(2 - alpha) (1.5: sqrt p) into D_i, so that
//     the tiled dq and dk/dv kernels form dz_ij = g_ij (e_ij - c_i).
// Every output is owned by one block and summed in a fixed order: deterministic, no atomics.
#include "attention/policies.h"
#include "backend/cuda/attention_tc.cuh"
#include "backend/cuda/common.h"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"

namespace tda::cuda {

namespace {
using namespace fa;
using attn::Entmax;
using attn::EntmaxPolicy;

// Per warp and key tile, the largest u of the warp's 16 rows there, recorded by the max pass in
// shared memory for the first kMaxRecordedTiles key tiles (T <= 64k; the tiles past them are
// never skipped): 16 KB at the cap, sized by T at launch.
constexpr int kMaxRecordedTiles = 1024;
TDA_HD constexpr int recorded_tiles(int T) {
  return (T + kTile - 1) / kTile < kMaxRecordedTiles ? (T + kTile - 1) / kTile : kMaxRecordedTiles;
}

// One pass over the key tiles up to the block's diagonal, recomputing the scores with the
// forward's mma: per row h of this lane (its quarter of the row's keys) and u = am1 scale q.k,
//   max pass (kMaxPass; t is not read): acc[h][0] = max u; tmax[tile][warp] = max u over the
//   warp's rows in the tile (a template parameter: with a run-time flag the points t were live
//   through the max pass too, and the kernel spilled, 72 bytes at sm_80)
//   else, at the point t[h]: over the support S = {u > t}: acc = {sum [u - t]^(1/am1),
//   sum [u - t], |S|, sum u, sum u^2, min u over S, max u off S}
// Tile-aware (AdaSplash's block skipping): a later pass skips a warp's tile whose recorded max is
// <= the smallest t of the warp's open rows (open[h]; a finished or padding row's sums are not
// read): every [u - t]_+ there is 0, so the sums are the same bits as without the skip. The block
// skips the copy too when no warp needs the tile. A skipped tile's u are all off S, and its
// recorded max stands in for them in max u off S: an upper bound, so the support test can only be
// stricter, and it is the same test wherever tau_S >= t (every point below the root; a Halley
// step past it can cost one more pass, not another result: the support, and with it tau_S's
// bits, are the same). Returns the tiles the block computed. The caller merges the quads. Every
// thread of the block must call it (barriers).
template <int kDk, bool kMaxPass>
__device__ inline long long threshold_pass(const AttnArgs& a, const uint16_t* k, const uint16_t* sq,
                                           uint16_t* sk, float* tmax, int i1, const int row[2],
                                           const float t[2], const bool open[2], float am1,
                                           float acc[2][7], int warp, int lane) {
  TDA_UNROLL
  for (int h = 0; h < 2; ++h) {
    acc[h][0] = kMaxPass ? -INFINITY : 0.f;
    acc[h][1] = acc[h][2] = acc[h][3] = acc[h][4] = 0.f;
    acc[h][5] = INFINITY;
    acc[h][6] = -INFINITY;
  }
  const bool may_skip = !kMaxPass && !a.no_skip;  // the max pass records, computing every tile
  float tmin = INFINITY;  // the smallest point of the warp's open rows (+inf: none open)
  if constexpr (!kMaxPass) {
    TDA_UNROLL
    for (int h = 0; h < 2; ++h)
      if (open[h]) tmin = fminf(tmin, t[h]);
    tmin = -warp_max(-tmin);
  }
  const int n_rec = recorded_tiles(a.T);
  long long computed = 0;
  for (int j0 = 0, jt = 0; j0 < i1; j0 += kTile, ++jt) {
    const bool need = !may_skip || jt >= n_rec || tmax[jt * kWarps + warp] > tmin;
    if (!need) {
      TDA_UNROLL
      for (int h = 0; h < 2; ++h) acc[h][6] = fmaxf(acc[h][6], tmax[jt * kWarps + warp]);
    }
    // also the barrier after which the previous tile is no longer read
    if (!__syncthreads_or(need)) continue;
    ++computed;
    load_tile_async<kDk>(sk, k, j0, a.T);
    cp_async_commit();
    cp_async_wait<0>();  // with the Q tile, the first time
    __syncthreads();
    if (!need) continue;  // warp-uniform
    float s[8][4], tile_max = -INFINITY;
    mma_rows<kDk, 8>(s, sq + 16 * warp * ld<kDk>(), sk, lane);
    TDA_UNROLL
    for (int nt = 0; nt < 8; ++nt) TDA_UNROLL
    for (int c = 0; c < 4; ++c) {
      const int h = c >> 1;
      if (!(j0 + acc_col(lane, nt, c) <= row[h] && row[h] < a.T)) continue;
      const float u = am1 * a.scale * s[nt][c];
      if constexpr (kMaxPass) {
        acc[h][0] = fmaxf(acc[h][0], u);
        tile_max = fmaxf(tile_max, u);
      } else {
        const float r = u - t[h];
        if (r > 0.f) {
          acc[h][0] += Entmax::pow_inv(r, am1);
          acc[h][1] += r;  // -f'(t) / 2 at alpha 1.5, the only alpha of the exact solver
          acc[h][2] += 1.f;
          acc[h][3] += u;
          acc[h][4] += u * u;
          acc[h][5] = fminf(acc[h][5], u);
        } else {
          acc[h][6] = fmaxf(acc[h][6], u);
        }
      }
    }
    if (kMaxPass && jt < n_rec) {
      tile_max = warp_max(tile_max);
      if (lane == 0) tmax[jt * kWarps + warp] = tile_max;
    }
  }
  return computed;
}

template <int kDk>
__global__ void __launch_bounds__(kThreads)
    entmax_threshold_kernel(AttnArgs a, AttnBf16Operands in) {
  TDA_DYNAMIC_SHARED(uint16_t, smem);
  uint16_t* sq = smem;
  uint16_t* sk = sq + tile_elems<kDk>();
  float* tmax = reinterpret_cast<float*>(sk + tile_elems<kDk>());  // recorded_tiles(T) x kWarps
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int T = a.T;
  size_t bh;
  if (!block_bh(a, &bh)) return;  // past B*H: the rounding of a (y, z)-split grid
  const int i0 = int(blockIdx.x) * kTile, i1 = min(T, i0 + kTile);
  if (i0 + kTile <= a.q_start) return;  // KV-cache decoding: these rows' stats stay untouched
  const uint16_t* k = in.k + bh * size_t(T) * kDk;
  const float am1 = a.entmax_alpha - 1.f;
  load_tile_async<kDk>(sq, in.q + bh * size_t(T) * kDk, i0, T);  // waited in pass 0
  int row[2];
  float t[2], tau[2], norm[2] = {1.f, 1.f}, acc[2][7];
  bool open[2];  // rows whose sums the next pass must compute
  TDA_UNROLL
  for (int h = 0; h < 2; ++h) {
    row[h] = i0 + 16 * warp + (lane >> 2) + 8 * h;
    open[h] = row[h] < T;
  }
  // Pass 0: the row max m. f(t) = sum [u - t]_+^(1/am1) - 1 falls from f(m - 1) >= 0 (the max
  // alone gives 1) to f(m - (1/n)^am1) <= 0.
  long long tiles =
      threshold_pass<kDk, true>(a, k, sq, sk, tmax, i1, row, nullptr, open, am1, acc, warp, lane);
  float lo[2], hi[2];
  TDA_UNROLL
  for (int h = 0; h < 2; ++h) {
    const float m = quad_max(acc[h][0]);
    lo[h] = tau[h] = t[h] = m - 1.f;
    hi[h] = Entmax::bracket_hi(m, row[h] + 1, am1);
  }
  if (a.entmax_bisect) {
    // entmax_bisect (any alpha): f(lo), then `entmax_iters` midpoints (the policies.h
    // Entmax::bisect sequence); tau = the last midpoint, norm = f(tau) + 1.
    float f_lo[2];
    for (int it = -1; it <= a.entmax_iters; ++it) {
      const bool last = it == a.entmax_iters;
      TDA_UNROLL
      for (int h = 0; h < 2; ++h) t[h] = it < 0 ? lo[h] : last ? tau[h] : 0.5f * (lo[h] + hi[h]);
      tiles +=
          threshold_pass<kDk, false>(a, k, sq, sk, tmax, i1, row, t, open, am1, acc, warp, lane);
      TDA_UNROLL
      for (int h = 0; h < 2; ++h) {
        const float f = quad_sum(acc[h][0]) - 1.f;
        if (it < 0) {
          f_lo[h] = f;
        } else if (last) {
          norm[h] = f + 1.f;
        } else {
          tau[h] = t[h];
          if (f * f_lo[h] >= 0.f)
            lo[h] = t[h];
          else
            hi[h] = t[h];
        }
      }
    }
  } else {
    // Exact (alpha 1.5): Halley's method on the convex, decreasing f from t = m - 1, where f >= 0:
    // f'(t) = -2 sum [u - t]_+ = -2 G, f''(t) = 2 |S|, so with the sums each pass already makes,
    //   t' = t - 2 f f' / (2 f'^2 - f f'') = t + 2 f G / (4 G^2 - |S| f),
    // kept inside a bracket of the root that every pass narrows (below). Each pass also gives the
    // closed form of the sort-based solver on its support S = {u > t},
    //   tau_S = M - sqrt(max(1/|S| - (Q - M^2), 0))  (M, Q: means of u, u^2 over S),
    // which is the threshold as soon as S is its own support (max u off S <= tau_S < min u on
    // S), the root of f being unique. That needs t between the largest u outside the true
    // support and the smallest inside it, not t at the root: a few passes where bisection took
    // entmax_iters + 2. Halley's cubic steps reach that window in fewer passes than Newton's
    // (AdaSplash takes Halley steps too): on random q, k the passes per block fell from 7.4 to
    // 5.1 at T 1,024 and 8.3 to 5.7 at T 4,096 (the max pass included; docs/cuda.md). A step may
    // land past the root; S then misses part of the support, the test fails, and the next step
    // comes back below (f < 0 there). A row whose point no longer moves (a u within rounding of
    // the threshold) keeps its last tau_S, as does one still open after entmax_iters + 2 passes:
    // bisection's result was that closed form too.
    bool done[2];
    TDA_UNROLL
    for (int h = 0; h < 2; ++h) done[h] = row[h] >= T;
    for (int it = 0; it <= a.entmax_iters + 1 && __syncthreads_or(!done[0] || !done[1]); ++it) {
      TDA_UNROLL
      for (int h = 0; h < 2; ++h) open[h] = !done[h];
      tiles +=
          threshold_pass<kDk, false>(a, k, sq, sk, tmax, i1, row, t, open, am1, acc, warp, lane);
      TDA_UNROLL
      for (int h = 0; h < 2; ++h) {  // every lane merges (full-warp shuffles), then decides
        const float F = quad_sum(acc[h][0]), G = quad_sum(acc[h][1]), cnt = quad_sum(acc[h][2]);
        const float su = quad_sum(acc[h][3]), su2 = quad_sum(acc[h][4]);
        const float min_in = quad_min(acc[h][5]), max_out = quad_max(acc[h][6]);
        if (done[h]) continue;
        // [lo, hi] brackets the root: f(lo) >= 0 >= f(hi) (f = -1 past every u, S empty)
        const float f = F - 1.f;
        if (f >= 0.f)
          lo[h] = t[h];
        else
          hi[h] = fminf(hi[h], t[h]);
        if (cnt > 0.f) {
          const float M = su / cnt, Q = su2 / cnt;
          tau[h] = M - sqrtf(fmaxf(1.f / cnt - (Q - M * M), 0.f));
          done[h] = max_out <= tau[h] && tau[h] < min_in;
        }
        // Halley's point where it falls inside the bracket (a step from below can pass every u:
        // ties), else Newton's from below (it stays below the root), else the bracket's middle.
        const float den = 4.f * G * G - cnt * f;
        float next = cnt > 0.f && den > 0.f ? t[h] + __fdividef(2.f * f * G, den) : NAN;
        if (!(next > lo[h] && next < hi[h]))
          next = f >= 0.f && G > 0.f ? t[h] + f / (2.f * G) : 0.5f * (lo[h] + hi[h]);
        done[h] = done[h] || next == t[h];
        t[h] = next;
      }
    }
  }
  if (a.entmax_threshold_tiles && threadIdx.x == 0)
    atomicAdd(reinterpret_cast<unsigned long long*>(a.entmax_threshold_tiles),
              (unsigned long long)tiles);
  TDA_UNROLL
  for (int h = 0; h < 2; ++h)
    if (row[h] < T && row[h] >= a.q_start && (lane & 3) == 0) {
      const size_t r = bh * T + row[h];
      a.stats[r * 2] = tau[h];
      a.stats[r * 2 + 1] = norm[h];
    }
}

// D_i = c_i for the tiled backward (Dbuf[2r]; Dbuf[2r + 1] = 0: one view).
template <int kDk, int kDv>
__global__ void __launch_bounds__(kThreads)
    entmax_rowc_kernel(AttnArgs a, AttnBf16Operands in, float* Dbuf, bool drop_term) {
  TDA_DYNAMIC_SHARED(uint16_t, smem);
  uint16_t* sq = smem;
  uint16_t* sk = sq + tile_elems<kDk>();
  uint16_t* sg = sk + tile_elems<kDk>();
  uint16_t* sv = sg + tile_elems<kDv>();
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int T = a.T;
  size_t bh;
  if (!block_bh(a, &bh)) return;  // past B*H: the rounding of a (y, z)-split grid
  const int i0 = int(blockIdx.x) * kTile, i1 = min(T, i0 + kTile);
  const size_t bqk = bh * size_t(T) * kDk, bv = bh * size_t(T) * kDv;
  load_tile_async<kDk>(sq, in.q + bqk, i0, T);  // waited with the first key tile
  load_tile_async<kDv>(sg, in.g + bv, i0, T);
  int row[2];
  float t[2], norm[2], G[2] = {}, Ge[2] = {};
  TDA_UNROLL
  for (int h = 0; h < 2; ++h) {
    row[h] = i0 + 16 * warp + (lane >> 2) + 8 * h;
    const bool in = row[h] < T;
    row_tau_stat<EntmaxPolicy, false>(a, bh * T + (in ? row[h] : 0), row[h], in, &t[h], &norm[h]);
  }
  for (int j0 = 0; j0 < i1; j0 += kTile) {
    __syncthreads();  // the previous tiles are no longer read
    load_tile_async<kDk>(sk, in.k + bqk, j0, T);
    load_tile_async<kDv>(sv, in.v + bv, j0, T);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    float s[8][4], e[8][4];
    mma_rows<kDk, 8>(s, sq + 16 * warp * ld<kDk>(), sk, lane);
    bool alive = false;
    TDA_UNROLL
    for (int nt = 0; nt < 8; ++nt) TDA_UNROLL
    for (int c = 0; c < 4; ++c) {
      const int h = c >> 1;
      s[nt][c] *= a.scale;
      alive |= j0 + acc_col(lane, nt, c) <= row[h] && row[h] < T && s[nt][c] > t[h];
    }
    if (!a.no_skip && !__syncthreads_or(alive)) continue;       // every p_ij of the pair is 0
    mma_rows<kDv, 8>(e, sg + 16 * warp * ld<kDv>(), sv, lane);  // e_ij = g_i.v_j
    TDA_UNROLL
    for (int nt = 0; nt < 8; ++nt) TDA_UNROLL
    for (int c = 0; c < 4; ++c) {
      const int h = c >> 1;
      if (!(j0 + acc_col(lane, nt, c) <= row[h] && row[h] < T)) continue;
      float p, f;
      EntmaxPolicy::bwd(s[nt][c], norm[h], t[h], EntmaxPolicy::param(a), &p, &f);
      G[h] += f;
      Ge[h] += f * e[nt][c];
    }
  }
  TDA_UNROLL
  for (int h = 0; h < 2; ++h) {
    const float g = quad_sum(G[h]), ge = quad_sum(Ge[h]);
    if (row[h] >= T || (lane & 3) != 0) continue;
    const size_t r = bh * T + row[h];
    Dbuf[2 * r] = drop_term ? 0.f : ge / g;  // g > 0: the support is never empty
    Dbuf[2 * r + 1] = 0.f;
  }
}

template <int kDk>
void launch_threshold(const AttnArgs& a, const AttnBf16Operands& in) {
  const size_t smem = 2 * tile_elems<kDk>() * sizeof(uint16_t) +
                      size_t(recorded_tiles(a.T)) * kWarps * sizeof(float);
  constexpr auto* kernel = entmax_threshold_kernel<kDk>;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
        "attention_entmax_threshold smem");
  check(launch<kernel>(tile_grid(a, "attention_entmax_threshold"), dim3(kThreads), smem, stream(),
                       a, in),
        "attention_entmax_threshold");
}

template <int kDk, int kDv>
void launch_rowc(const AttnArgs& a, const AttnBf16Operands& in, float* Dbuf, bool drop_term) {
  const size_t smem = 2 * (tile_elems<kDk>() + tile_elems<kDv>()) * sizeof(uint16_t);
  constexpr auto* kernel = entmax_rowc_kernel<kDk, kDv>;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
        "attention_entmax_rowc smem");
  check(launch<kernel>(tile_grid(a, "attention_entmax_rowc"), dim3(kThreads), smem, stream(), a, in,
                       Dbuf, drop_term),
        "attention_entmax_rowc");
}
}  // namespace

void attention_entmax_threshold(const AttnArgs& a, const fa::AttnBf16Operands& in) {
  TDA_CHECK(
      a.entmax_alpha > 1.f && a.entmax_alpha <= 2.f,
      "attention_entmax_threshold: alpha must be in (1, 2], got " + std::to_string(a.entmax_alpha));
  TDA_CHECK(
      a.entmax_bisect || a.entmax_alpha == 1.5f,
      "attention_entmax_threshold: the exact solver is for alpha 1.5 only (bisect otherwise)");
  if (size_t(a.B) * a.H * a.T == 0) return;
  with_head_dim_bucket<false>(a,
                              [&](auto dk, auto) { launch_threshold<decltype(dk)::value>(a, in); });
}

void attention_entmax_rowc(const AttnArgs& a, const fa::AttnBf16Operands& in, float* Dbuf,
                           bool drop_term) {
  if (size_t(a.B) * a.H * a.T == 0) return;
  with_head_dim_bucket<false>(a, [&](auto dk, auto dv) {
    launch_rowc<decltype(dk)::value, decltype(dv)::value>(a, in, Dbuf, drop_term);
  });
}

}  // namespace tda::cuda
