// Building blocks of the tensor-core attention kernels (kernels/attention_fwd.cu,
// kernels/attention_bwd.cu): bf16 tiles in shared memory, mma.m16n8k16 fragments, quad
// reductions. FlashAttention-2 layout: a block owns kTile = 64 query rows (forward, dq) or 64 keys
// (dk/dv), each of its 4 warps 16 of them (the forward's 128-row shape: 32, mma_rows_rt); the
// other side streams through shared memory in tiles of 64. kTile equals the CPU kernel's tile,
// so tiles_skipped / tiles_total compare one to one.
//
// Fragment layout (PTX ISA, m16n8k16; g = lane/4, t = lane%4): an accumulator c[4] of a 16x8
// tile holds (row g, cols 2t, 2t+1) in c[0], c[1] and (row g+8, same cols) in c[2], c[3]. Two
// adjacent accumulators (cols 0..7 and 8..15) are exactly the A fragment of a 16x16 operand, so
// P = w(S) goes from the score mma into the P.V mma without shared memory.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "attention/policies.h"
#include "backend/cuda/async_copy.h"
#include "backend/cuda/grid.h"
#include "backend/cuda/kernel_helpers.cuh"
#include "backend/cuda/mma.h"
#include "backend/ops.h"
#include "core/error.h"

namespace tda::cuda::fa {

constexpr int kTile = 64;  // query rows per block, keys per streamed tile
constexpr int kWarps = 4;  // 16 rows per warp
constexpr int kThreads = kWarps * kWarp;
// The most rows a tile copy reads (the forward's 128-key tiles, attention.fwd_block_keys): the
// operand copies end in this many rows of padding (attention_operands_scratch).
constexpr int kMaxTileRows = 2 * kTile;

// Shared tiles are kTile rows of kD bf16 (the head-dim bucket, zero-padded past D) plus 8 bf16 of
// padding: rows then start 4 banks apart, so the fragment loads below are conflict-free.
template <int kD>
TDA_HD constexpr int ld() {
  return kD + 8;
}
template <int kD>
TDA_HD constexpr int tile_elems() {
  return kTile * ld<kD>();
}

__device__ inline uint16_t bf16_bits(float x) {
  return __bfloat16_as_ushort(__float2bfloat16(x));
}
// Two bf16 in one register, the smaller index in the low half (the mma operand convention).
__device__ inline uint32_t pack_bf16(float lo, float hi) {
  return uint32_t(bf16_bits(lo)) | (uint32_t(bf16_bits(hi)) << 16);
}
// Fragments come from shared memory by ldmatrix (mma.h): one instruction per 16x16 A operand or
// per two 16x8 B operands, where 32-bit loads took four (A), two per B (n-major) and four 16-bit
// loads per B (k-major). Every row address is 16-byte aligned (tile rows of ld<kD> bf16, columns
// in steps of 8) and the 8 rows a phase reads start 4 banks apart: conflict-free.
// A operand (16x16) stored row-major, A[r][c] = base[r * ld + c]: lanes 0-15 address rows 0-15 at
// column 0, lanes 16-31 the same rows at column 8, so matrices 0..3 are the PTX fragment's
// (rows 0-7, cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15).
__device__ inline void frag_a(uint32_t a[4], const uint16_t* base, int ldm, int lane) {
  ldmatrix_x4(a, base + (lane & 15) * ldm + 8 * (lane >> 4));
}
// B operands (16x8) of n-blocks n and n + 1 stored n-major, B[k][n] = base[n * ld + k] (the K tile
// in S = Q K^T): b[0..1] for n-block 0 (rows 0-7 of base, k 0-7 then 8-15), b[2..3] for n-block 1
// (rows 8-15).
__device__ inline void frag_b2_nmajor(uint32_t b[4], const uint16_t* base, int ldm, int lane) {
  ldmatrix_x4(b, base + ((lane & 7) + 8 * (lane >> 4)) * ldm + 8 * ((lane >> 3) & 1));
}
// B operands of n-blocks n and n + 1 stored k-major, B[k][n] = base[k * ld + n] (the V tile in
// O = P V): the transposing load of 8x8 blocks (k 0-7, k 8-15) at columns 0 and 8.
__device__ inline void frag_b2_kmajor(uint32_t b[4], const uint16_t* base, int ldm, int lane) {
  ldmatrix_x4_trans(b, base + ((lane & 7) + 8 * ((lane >> 3) & 1)) * ldm + 8 * (lane >> 4));
}
// A operand from two accumulators holding columns 0..7 (c0) and 8..15 (c1), rounded to bf16.
__device__ inline void frag_a_from_acc(uint32_t a[4], const float c0[4], const float c1[4]) {
  a[0] = pack_bf16(c0[0], c0[1]);
  a[1] = pack_bf16(c0[2], c0[3]);
  a[2] = pack_bf16(c1[0], c1[1]);
  a[3] = pack_bf16(c1[2], c1[3]);
}

// The kernels' operands as bf16 copies made once per call (attention_operands.cu): per (b, h), T
// rows of the head-dim bucket's width (bucket_dqk, bucket_dv), zero past D. g is dO (the
// backward's; as wide as v).
struct AttnBf16Operands {
  const uint16_t *q = nullptr, *k = nullptr, *v = nullptr, *q2 = nullptr, *k2 = nullptr,
                 *g = nullptr;
};
// Its pointers, for the emulator's strict mode (AttnArgs' list: backend/ops.h).
template <class F>
void device_pointers(const AttnBf16Operands& o, F&& f) {
  f(o.q, "q");
  f(o.k, "k");
  f(o.v, "v");
  f(o.q2, "q2");
  f(o.k2, "k2");
  f(o.g, "g");
}
// The head-dim buckets the kernels are compiled for (kDk, kDv): (64, 64), (64, 128) and, one view
// only, (128, 128); every launcher picks its kernel through with_head_dim_bucket (below), which
// reads these two functions. They are also the operand copies' row widths: a kernel knows its
// tiles' global row stride when compiled, so a thread's copies of a tile are one row pointer and
// immediate offsets (load_tile_async). A head dim below its bucket costs the padding in the
// copies (a tiny config's Dqk of 32 stores 64 columns); the configs' head dims (64; Dv 128 for
// the Diff kinds) are bucket widths.
TDA_HD constexpr int bucket_dqk(int Dqk) {
  return Dqk <= 64 ? 64 : 128;
}
TDA_HD constexpr int bucket_dv(int Dqk, int Dv) {
  return Dqk <= 64 && Dv <= 64 ? 64 : 128;
}

// Rows [r0, r0 + kRows) (kRows: kTile, or the forward's 128-key tiles) of a (rows x kD) bf16 matrix
// (an operand copy, kD its bucket's width, zero past D) into a tile by cp.async, 16 bytes per copy,
// zero-filled past `rows`. No conversion and no register is spent here: the rounding was done once,
// by the cast. (Until 2026-11-27 each tile was loaded from fp32 and rounded by every block that
// read it; the values are the same.) The caller commits the group and waits for it (async_copy.h).
// A zero-filled copy reads 0 bytes, yet its address is the row's all the same (r0 <= rows - 1,
// so at most kRows - 1 rows past the matrix): the operand buffer ends in kMaxTileRows rows of
// padding (kTile where a bucket is 128 wide: 128-row copies serve head dims <= 64 only;
// attention_operands_scratch), so every address is inside it, and no select per copy is needed.
// The row stride is kD, a constant: one row pointer per thread (a 32-bit row offset, as
// attention_bf16_operands checks (T + kMaxTileRows) kD < 2^31, and one IMAD.WIDE), and each copy at
// an immediate offset from it. With the stride a kernel argument, each copy cost an IMAD.WIDE from
// that pointer, or, where ptxas would have held the pointers over the key loop and spilled (the
// two-view kinds' forward, every dk/dv kernel), a 64-bit product, selects and adds (about 10
// integer instructions per copy, 12 copies per thread and tile in tda's forward).
// kAnyRow copies the rows past `rows` too, unfilled, with no row test (an ISETP and an IADD3 per
// copy): for a tile the caller knows to be inside the matrix, or whose rows past it the caller
// never reads (the forward's K on the diagonal tile: a key past T is past every row, so its score
// is masked). Their addresses are the zero-filled copies' (inside the padding, as above).
template <int kD, bool kAnyRow = false, int kRows = kTile>
__device__ inline void load_tile_async(uint16_t* dst, const uint16_t* src, int r0, int rows) {
  constexpr int kChunks = kD / 8, kRowsPerPass = kThreads / kChunks;
  static_assert(kRows % kRowsPerPass == 0 && kRows <= kMaxTileRows, "the same count per thread");
  const int c = 8 * (int(threadIdx.x) % kChunks), rt = int(threadIdx.x) / kChunks;
  const uint16_t* p = src + ((r0 + rt) * kD + c);
  TDA_UNROLL
  for (int it = 0; it < kRows / kRowsPerPass; ++it) {
    const int r = rt + it * kRowsPerPass;
    const bool in = kAnyRow || r0 + r < rows;
    cp_async_16(dst + r * ld<kD>() + c, p + it * kRowsPerPass * kD, in ? 16 : 0);
  }
}

// acc[rt][nt] (16 x 8 each, nt < kNT: a 16 x 8kNT tile per row tile rt < kRT) = A_rt(16 x kD)
// B(kD x 8kNT), A_rt row-major at a_base + 16 rt rows, B n-major at b_base (both with row stride
// ld<kD>). Each B fragment is loaded once for the kRT row tiles: with kRT = 2 (a warp owns 32
// query rows, FlashAttention-2's forward warp tile at head dim 64) a fragment load per 4 mma
// instead of 2, half the shared-memory reads of B per product. The whole bucket is multiplied, D or
// not: every tile is zero past D (load_tile_async fills the columns past the copies' row and
// those copies are zero past D), so those products add exactly 0. A test of D per 16 columns
// made every fragment load a branch, and ptxas rebuilt each one's lane address from %tid inside
// it (14 integer instructions per ldmatrix in the softmax forward's key loop, docs/perf.md).
// kCutD keeps the test (products past D skipped) where its branches, which keep ptxas from
// hoisting every fragment load ahead of the mma, are what keeps a kernel inside the register
// file: diff softmax's forward and dq (two accumulators; straight-line they spill at Dv = 128)
// and the forward's survivor-counting instance (softplus's spilled).
template <int kD, int kNT, int kRT, bool kCutD = false>
__device__ inline void mma_rows_rt(float (*acc)[kNT][4], const uint16_t* a_base,
                                   const uint16_t* b_base, int lane, int D = kD) {
  static_assert(kNT % 2 == 0 && kD % 16 == 0, "B fragments are loaded two n-blocks at a time");
  TDA_UNROLL
  for (int rt = 0; rt < kRT; ++rt) TDA_UNROLL
  for (int nt = 0; nt < kNT; ++nt)
    acc[rt][nt][0] = acc[rt][nt][1] = acc[rt][nt][2] = acc[rt][nt][3] = 0.f;
  TDA_UNROLL
  for (int kc = 0; kc < kD / 16; ++kc) {
    if (kCutD && 16 * kc >= D) continue;
    uint32_t a[kRT][4];
    TDA_UNROLL
    for (int rt = 0; rt < kRT; ++rt)
      frag_a(a[rt], a_base + 16 * rt * ld<kD>() + 16 * kc, ld<kD>(), lane);
    TDA_UNROLL
    for (int nt = 0; nt < kNT; nt += 2) {
      uint32_t b[4];
      frag_b2_nmajor(b, b_base + 8 * nt * ld<kD>() + 16 * kc, ld<kD>(), lane);
      TDA_UNROLL
      for (int rt = 0; rt < kRT; ++rt) {
        mma_m16n8k16_bf16(acc[rt][nt], a[rt], b, acc[rt][nt]);
        mma_m16n8k16_bf16(acc[rt][nt + 1], a[rt], b + 2, acc[rt][nt + 1]);
      }
    }
  }
}
// kRT = 1: one 16-row tile.
template <int kD, int kNT, bool kCutD = false>
__device__ inline void mma_rows(float acc[kNT][4], const uint16_t* a_base, const uint16_t* b_base,
                                int lane, int D = kD) {
  mma_rows_rt<kD, kNT, 1, kCutD>(reinterpret_cast<float(*)[kNT][4]>(acc), a_base, b_base, lane, D);
}

// acc[rt][n] (16 x 8, n < kD/8: a 16 x kD tile per row tile) += W[rt](16 x 8kNT, in accumulator
// layout) B(8kNT x kD), B k-major at b_base (a row of the tile per key/query). As in mma_rows,
// the bucket's columns past D are zero in B, so acc's columns past D hold products with 0 (never
// written out); kCutD skips them. Each B fragment serves the kRT row tiles.
template <int kD, int kNT, int kRT, bool kCutD = false>
__device__ inline void mma_acc_rt(float (*acc)[kD / 8][4], const float (*w)[kNT][4],
                                  const uint16_t* b_base, int lane, int D = kD) {
  TDA_UNROLL
  for (int kc = 0; kc < kNT / 2; ++kc) {
    uint32_t a[kRT][4];
    TDA_UNROLL
    for (int rt = 0; rt < kRT; ++rt) frag_a_from_acc(a[rt], w[rt][2 * kc], w[rt][2 * kc + 1]);
    TDA_UNROLL
    for (int n = 0; n < kD / 8; n += 2) {
      if (kCutD && 8 * n >= D) continue;
      uint32_t b[4];
      frag_b2_kmajor(b, b_base + 16 * kc * ld<kD>() + 8 * n, ld<kD>(), lane);
      TDA_UNROLL
      for (int rt = 0; rt < kRT; ++rt) {
        mma_m16n8k16_bf16(acc[rt][n], a[rt], b, acc[rt][n]);
        if (!kCutD || 8 * (n + 1) < D)
          mma_m16n8k16_bf16(acc[rt][n + 1], a[rt], b + 2, acc[rt][n + 1]);
      }
    }
  }
}
template <int kD, int kNT, bool kCutD = false>
__device__ inline void mma_acc(float acc[kD / 8][4], const float w[kNT][4], const uint16_t* b_base,
                               int lane, int D = kD) {
  mma_acc_rt<kD, kNT, 1, kCutD>(reinterpret_cast<float(*)[kD / 8][4]>(acc),
                                reinterpret_cast<const float(*)[kNT][4]>(w), b_base, lane, D);
}

// Sum / max over the 4 lanes of a quad (the lanes that share accumulator rows).
__device__ inline float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}
__device__ inline float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ inline float quad_min(float v) {
  return -quad_max(-v);
}

// Scales a tile's scores (kNT accumulators of 16 x 8 per view; s *= scale, both views; s2 is read
// for two views only) and returns whether this lane's two rows (accumulator layout) have a weight
// that can be non-zero there: some score of either view, valid by ok(nt, c), above its row's
// threshold (every sparse policy weighs 0 at s <= tau). A running max per row replaces a test per score: the ||-chains of
// per-score tests compiled to a branch per score pair (BSSY/BSYNC, 4 control instructions each;
// tda's forward spent 440 of its 3,892 instructions per tile on them). fmaxf drops NaN, as
// s > tau is false for it: the answer is the per-score tests', bit for bit.
// kShift (the threshold policies, shifts_scores): each score becomes r = s scale - tau_i, one
// FFMA where the scale's FMUL and the weight's FADD were two, and the test is r > 0; the caller
// then weighs r against a threshold of 0.
template <bool kTwo, bool kDiag, bool kShift, int kNT = 8, class Ok>
__device__ inline bool scale_rows_alive(float (*s1)[4], float (*s2)[4], float scale,
                                        const float tau[2], const bool row_ok[2], Ok ok) {
  bool alive = false;
  TDA_UNROLL
  for (int h = 0; h < 2; ++h) {
    const float shift = kShift ? -tau[h] : 0.f;
    float mx = -INFINITY;
    TDA_UNROLL
    for (int nt = 0; nt < kNT; ++nt) TDA_UNROLL
    for (int c = 2 * h; c < 2 * h + 2; ++c) {
      s1[nt][c] = kShift ? fmaf(s1[nt][c], scale, shift) : s1[nt][c] * scale;
      float v = s1[nt][c];
      if constexpr (kTwo) {
        s2[nt][c] = kShift ? fmaf(s2[nt][c], scale, shift) : s2[nt][c] * scale;
        v = fmaxf(v, s2[nt][c]);
      }
      if constexpr (kDiag) v = ok(nt, c) ? v : -INFINITY;
      mx = fmaxf(mx, v);
    }
    alive = alive | (row_ok[h] & (mx > (kShift ? 0.f : tau[h])));
  }
  return alive;
}

// Merge a policy's row state over the quad (each lane saw a quarter of the row's keys).
template <class P>
__device__ inline void quad_merge(typename P::Row& r) {
  if constexpr (P::kNormalized) {
    constexpr int n = int(sizeof(typename P::Row) / sizeof(float));
    for (int off = 1; off <= 2; off <<= 1) {
      float f[n];
      memcpy(f, &r, sizeof r);
      TDA_UNROLL
      for (int c = 0; c < n; ++c) f[c] = __shfl_xor_sync(0xffffffffu, f[c], off);
      typename P::Row o;
      memcpy(&o, f, sizeof o);
      P::merge(r, o);
    }
  }
}

// Element r of accumulator nt: row offset (within the warp's 16) and column (within the tile).
__device__ inline int acc_row(int lane, int r) {
  return (lane >> 2) + 8 * (r >> 1);
}
__device__ inline int acc_col(int lane, int nt, int r) {
  return 8 * nt + 2 * (lane & 3) + (r & 1);
}

// 2^x on the special-function unit (ex2.approx.ftz: relative error below 2^-22, results under
// 2^-126 flushed to 0), the exponential of FlashAttention-2's softmax. The accurate expf costs 8
// instructions around the same MUFU.EX2 (docs/perf.md). The emulator computes exp2f.
__device__ inline float fast_exp2(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return exp2f(x);
#endif
}

// Softmax in base 2, the kernels' form of attn::SoftmaxPolicy (FlashAttention-2's folding): the
// kernels scale scores by scale log2(e) (score_frame) where the CPU scales by `scale`, so a weight
// is one ex2: s' = s log2(e), m' = max s', w = 2^(s' - m'), l = sum w. The saved statistic stays
// the natural LSE = ln(2) (m' + log2 l), the value the CPU backend and the diagnostics read; the
// backward takes it back into the frame (stat_frame) once per row: a = 2^(s' - LSE log2(e)).
struct SoftmaxExp2Policy : attn::SoftmaxPolicy {
  __device__ static float rebase(Row& r, float tile_max) {
    const float m_new = r.m > tile_max ? r.m : tile_max;
    const float corr = fast_exp2(r.m - m_new);  // 2^-inf = 0 on the first tile
    r.l *= corr;
    r.m = m_new;
    return corr;
  }
  __device__ static float weight(const Row& r, float s, float, int) { return fast_exp2(s - r.m); }
  // The forward's weight of a raw score x = q.k (s = x scale), FlashAttention-2's: the scale is
  // folded into one FFMA before the ex2 (2^(x scale - m), rounded once where s - m rounded
  // twice), and the row max is taken over raw scores (max x scale = max(x scale), scale > 0), so
  // the tile's 32 FMULs per lane are gone.
  __device__ static float weight_raw(const Row& r, float x, float scale) {
    return fast_exp2(fmaf(x, scale, -r.m));
  }
  __device__ static float stat(const Row& r) { return (r.m + log2f(r.l)) * 0.69314718055994531f; }
  __device__ static void merge(Row& r, const Row& o) {
    const float M = r.m > o.m ? r.m : o.m;
    if (M == -INFINITY) return;
    r.l = (r.m == -INFINITY ? 0.f : r.l * fast_exp2(r.m - M)) +
          (o.m == -INFINITY ? 0.f : o.l * fast_exp2(o.m - M));
    r.m = M;
  }
  __device__ static void bwd(float s, float lse2, float, int, float* a, float* f) {
    *a = fast_exp2(s - lse2);
    *f = *a;
  }
  // The backward's weight of a raw score x, with the scale folded as in weight_raw.
  __device__ static void bwd_raw(float x, float scale, float lse2, float* a, float* f) {
    *a = fast_exp2(fmaf(x, scale, -lse2));
    *f = *a;
  }
};
// 1.5-entmax with its alpha fixed when compiling (attn::EntmaxPolicy at am1 = 0.5, bit for bit:
// w = r^2 / 4, f = sqrt(w / norm)): no alpha test and no powf path per score. The single backward
// kernel (dq by atomics) runs entmax with it: its any-alpha instance spilled (8 bytes, sm_80).
struct Entmax15Policy : attn::EntmaxPolicy {
  __device__ static float weight(const Row&, float s, float t, float) {
    const float r = s - t;
    return r > 0.f ? 0.25f * r * r : 0.f;
  }
  __device__ static void bwd(float s, float norm, float t, float, float* a, float* f) {
    const float r = s - t;
    *a = r > 0.f ? 0.25f * r * r / norm : 0.f;
    *f = r > 0.f ? sqrtf(*a) : 0.f;
  }
};

// Whether the kernels keep a policy's scores raw and fold the scale into its weight
// (SoftmaxExp2Policy::weight_raw, bwd_raw): softmax with one view (diff softmax's two keep their
// scaled scores).
template <class P, bool kTwo>
TDA_HD constexpr bool folds_scale() {
  return std::is_same<P, SoftmaxExp2Policy>::value && !kTwo;
}

// Whether the kernels shift a policy's scores by the row threshold as they scale them
// (scale_rows_alive's kShift: r = fmaf(x, scale, -tau_i)) and weigh r with tau 0: the
// rectifiers, whose weight and gradient read s only as s - tau. The same bits as the CPU's
// (x scale) - tau: their kinds have scale 1 (tra, tda: cosine scores, x 1 is exact) or tau 0
// (rela, diff_rela: x scale - 0 rounds once either way).
template <class P>
TDA_HD constexpr bool shifts_scores() {
  return std::is_base_of<attn::ThresholdPolicy, P>::value;
}
// Whether the backward reads a policy's gradient from m = max(r, 0) of the shifted scores
// (ThresholdPowPolicy<2>: a = m^2, f = 2 m): dq through grad_entry_clipped, dk/dv keeping m
// between its weight and gradient passes (no second max or test).
template <class P>
TDA_HD constexpr bool clips_scores() {
  if constexpr (shifts_scores<P>())
    return P::kClipsScores;
  else
    return false;
}
// x scaled as clips_scores<P>()'s slope scales m (f = 2 m: 2 x); x for the other policies.
template <class P>
TDA_HD float clipped_slope(float x) {
  if constexpr (clips_scores<P>())
    return P::slope_clipped(x);
  else
    return x;
}

// The factor a policy's scores carry beyond `scale`, and its saved statistic in that frame (the
// identity for every policy but SoftmaxExp2Policy: x * 1.f is exact, the other kinds' results
// are unchanged).
template <class P>
TDA_HD constexpr float score_frame() {
  return 1.f;
}
template <>
TDA_HD constexpr float score_frame<SoftmaxExp2Policy>() {
  return 1.44269504088896341f;  // log2(e)
}

// The tiled kernels' argument: the call plus its scores' scale in the policy's frame, a.scale
// score_frame<P>(), computed on the host: a kernel parameter is read from the constant bank, where
// a product formed in the kernel holds a register for its whole life (diff softmax's forward
// spilled).
struct TileArgs : AttnArgs {
  float score_scale = 0.f;
};
template <class P>
inline void set_tile_args(TileArgs* t, const AttnArgs& a) {
  static_cast<AttnArgs&>(*t) = a;
  t->score_scale = a.scale * score_frame<P>();
}

// Per-row statistics of a policy math (attn_n_stats, usable in device code): one per normalised
// view (softmax LSE, softplus F), none for rectifiers.
template <class P, bool kTwo>
TDA_HD constexpr int n_stats() {
  return P::kStatTau ? 2 : P::kNormalized ? (kTwo ? 2 : 1) : 0;  // entmax: (tau, norm)
}

// A query row's threshold (a weight is non-zero only where s > tau) and first statistic, the
// values the policy's weight / bwd take: a.tau[i] and stats[0] for every policy but entmax,
// whose pre-pass left (tau_i, norm_i) in the stats: the score-frame threshold tau_i / (alpha - 1)
// and norm_i.
template <class P, bool kTwo>
__device__ inline void row_tau_stat(const AttnArgs& a, size_t r, int i, bool in, float* tau,
                                    float* st1) {
  constexpr int nst = n_stats<P, kTwo>();
  if constexpr (P::kStatTau) {
    *tau = in ? a.stats[r * 2] / (a.entmax_alpha - 1.f) : 0.f;
    *st1 = in ? a.stats[r * 2 + 1] : 1.f;
  } else {
    *tau = (a.tau && in) ? a.tau[i] : 0.f;
    *st1 = (nst >= 1 && in) ? a.stats[r * nst] : 0.f;
  }
}

// Calls f(Policy{}) with the threshold policy of the run's power: p = 1 and 2 compiled in
// (ThresholdPowPolicy), any other p through ThresholdPolicy's loop over the power.
template <class F>
inline void with_threshold_policy(int power, F&& f) {
  if (power == 2)
    f(attn::ThresholdPowPolicy<2>{});
  else if (power == 1)
    f(attn::ThresholdPowPolicy<1>{});
  else
    f(attn::ThresholdPolicy{});
}

// Head dims are served by buckets of 64 and 128, for Dqk and Dv separately (shared tiles and
// accumulators sized for the bucket, the mma loops cut at the real D). Two-view kinds take
// Dqk <= 64 (the configs' diff heads: Dqk 32/64, Dv 64/128): three accumulators of 128 would
// not fit in registers.
constexpr int kMaxHeadDim = 128, kMaxTwoViewDqk = 64;
inline int max_head_dim(const AttnArgs& a) {
  return a.Dqk > a.Dv ? a.Dqk : a.Dv;
}

// The one dispatch from a's head dims to the kernel compiled for their bucket: calls
// f(Dk, Dv) with integral constants, Dk = bucket_dqk(a.Dqk), Dv = bucket_dv(a.Dqk, a.Dv). The
// operand copies' row stride is that bucket's width, so a launcher that picked its kernel by
// its own test could read them at the wrong stride. kTwo: (128, 128) is not compiled.
template <bool kTwo, class F>
void with_head_dim_bucket(const AttnArgs& a, F&& f) {
  using D64 = std::integral_constant<int, 64>;
  using D128 = std::integral_constant<int, 128>;
  const int dk = bucket_dqk(a.Dqk), dv = bucket_dv(a.Dqk, a.Dv);
  if (dk == 64 && dv == 64)
    f(D64{}, D64{});
  else if (dk == 64)
    f(D64{}, D128{});
  else if constexpr (!kTwo)
    f(D128{}, D128{});
  else
    throw Error("cuda attention: two-view kinds need Dqk <= " + std::to_string(kMaxTwoViewDqk));
}

inline size_t qk_stride(const AttnArgs& a) {
  return a.qk_bh_stride ? a.qk_bh_stride : size_t(a.T) * a.Dqk;
}

// The tiled kernels' grid: x = blocks of `rows` query rows (or keys), (y, z) = b*H + h (grid.h).
inline dim3 tile_grid(const AttnArgs& a, const char* what, int rows = kTile) {
  return attention_tile_grid(a.T, size_t(a.B) * size_t(a.H), rows, what);
}
// This block's b*H + h; false for the few blocks past B*H when (y, z) round it up. Read from the
// special registers, not kept in one (the 2-D grid's blockIdx.y cost none either).
__device__ inline bool block_bh(const AttnArgs& a, size_t* bh) {
  *bh = size_t(blockIdx.z) * gridDim.y + blockIdx.y;
  return *bh < size_t(a.B) * size_t(a.H);
}

// The same b*H + h, for a kernel's epilogue: the special registers read again (volatile, so the
// compiler does not reuse the prologue's value), so that no register holds it over the key loop
// (tda's dq, at 255 registers, spilled it to local memory).
__device__ inline size_t block_bh_again() {
#if defined(__CUDA_ARCH__)
  unsigned y, z, ny;
  asm volatile("mov.u32 %0, %%ctaid.y;" : "=r"(y));
  asm volatile("mov.u32 %0, %%ctaid.z;" : "=r"(z));
  asm volatile("mov.u32 %0, %%nctaid.y;" : "=r"(ny));
  return size_t(z) * ny + y;
#else
  return size_t(blockIdx.z) * gridDim.y + blockIdx.y;
#endif
}

}  // namespace tda::cuda::fa

namespace tda::cuda {
// kernels/attention_operands.cu: casts q, k, v (q2, k2 for two views; dO when with_dout) into
// `scratch` (attention_operands_scratch(a, with_dout) bf16, cuda_ops.h) and returns the copies.
// With a.saved, q, k, v's go there in the forward and the backward takes them as they are.
fa::AttnBf16Operands attention_bf16_operands(const AttnArgs& a, uint16_t* scratch, bool with_dout);
// Entmax's row pre-passes (kernels/attention_entmax.cu), on those copies: stats (tau, norm) before
// the tiled forward; D_i = c_i (Dbuf, 2 floats per row) before the tiled backward.
void attention_entmax_threshold(const AttnArgs& a, const fa::AttnBf16Operands& in);
void attention_entmax_rowc(const AttnArgs& a, const fa::AttnBf16Operands& in, float* Dbuf,
                           bool drop_term);
}  // namespace tda::cuda
