// The softmax-family kinds on a vendor's fused attention (sdpa.h: cuDNN), in place of the tiled
// kernels. The kinds hand the backend one AttnArgs; this maps it onto the primitive's calls:
//   kSoftmax      o = SDPA(q', k, v)                   q' = f q (AttnArgs::q_scale) in the cast
//                 out = float(o), stats = lse
//   kDiffSoftmax  o1 = SDPA(q, k, v), o2 = SDPA(q2, k2, v)   (the Differential Transformer's own
//                 flash path: two calls and the combination)
//                 out = float(o1) - lambda float(o2), out2 = float(o2), stats = (lse1, lse2)
//   backward      view 1 takes dO1 = g, view 2 dO2 = -lambda g, each with its own o and lse
//                 (o1 = out + lambda out2 recovered in fp32, then rounded as the forward's was);
//                 dv = dv1 + dv2;  drow_lambda_i = -bf16(g_i).o2_i (the tiled kernel's rowdot)
// q, k, v reach the primitive as the tiled kernels' bf16 copies (attention_operands.cu: one cast
// per call, or the forward's saved ones): the same bits as the tiled kernels' operands, so the
// two implementations differ only inside the attention. Its bf16 outputs are widened here into
// the fp32 buffers the kinds own (out, dq, dk, dv; q and k may be views, qk_bh_stride).
#include <algorithm>

#include "backend/cuda/attention_tc.cuh"
#include "backend/cuda/attention_vendor.h"
#include "backend/cuda/common.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/kernel_helpers.cuh"
#include "core/error.h"

namespace tda::cuda {

namespace {
constexpr int kThreads = 256;

__device__ inline float bf16_float(uint16_t x) {
  return __bfloat162float(__ushort_as_bfloat16(x));
}

// out = o1 - lambda o2 and out2 = o2 (two views; one view: out = o1), columns [0, Dv) of the
// copies' ld_v-wide rows; stats (rows, n_stats) = (lse1, lse2) for two views.
__global__ void vendor_merge_kernel(float* out, float* out2, const uint16_t* o1, const uint16_t* o2,
                                    const float* lambda, int Dv, int ldv, size_t n) {
  TDA_GRID_STRIDE(i, n) {
    const size_t r = i / unsigned(Dv), c = i % unsigned(Dv);
    const float a = bf16_float(o1[r * ldv + c]);
    if (o2) {
      const float b = bf16_float(o2[r * ldv + c]);
      out[i] = a - *lambda * b;
      out2[i] = b;
    } else {
      out[i] = a;
    }
  }
}

// The two views' lse, one (B, H, T) row each for the primitive, pairs (lse1, lse2) in stats.
__global__ void vendor_stats_kernel(float* stats, const float* lse1, const float* lse2,
                                    size_t rows) {
  TDA_GRID_STRIDE(r, rows) {
    stats[2 * r] = lse1[r];
    stats[2 * r + 1] = lse2[r];
  }
}
__global__ void vendor_split_stats_kernel(float* lse1, float* lse2, const float* stats,
                                          size_t rows) {
  TDA_GRID_STRIDE(r, rows) {
    lse1[r] = stats[2 * r];
    lse2[r] = stats[2 * r + 1];
  }
}

// Backward inputs, one warp per row: o1 = bf16(out + lambda out2) and o2 = bf16(out2) (two views;
// one: o1 = bf16(out)), g2 = bf16(-lambda g); drow_lambda = -bf16(g).out2. Columns past Dv of
// the ld_v-wide rows are zero (the primitive reads them as head-dim padding).
template <bool kTwo>
__global__ void vendor_backward_prep_kernel(uint16_t* o1, uint16_t* o2, uint16_t* g2,
                                            float* drow_lambda, const float* out,
                                            const float* out2, const float* g,
                                            const float* lambda, int Dv, int ldv, size_t rows) {
  const size_t r = (size_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (r >= rows) return;
  const float lam = kTwo ? *lambda : 0.f;
  float go2 = 0.f;
  for (int c = lane; c < ldv; c += kWarp) {
    const bool in = c < Dv;
    const float x = in ? out[r * Dv + c] : 0.f;
    if (!kTwo) {
      o1[r * ldv + c] = fa::bf16_bits(x);
      continue;
    }
    const float y = in ? out2[r * Dv + c] : 0.f, gc = in ? g[r * Dv + c] : 0.f;
    o1[r * ldv + c] = fa::bf16_bits(x + lam * y);
    o2[r * ldv + c] = fa::bf16_bits(y);
    g2[r * ldv + c] = fa::bf16_bits(-lam * gc);
    go2 += __bfloat162float(__float2bfloat16(gc)) * y;
  }
  if (kTwo) {
    go2 = warp_sum(go2);
    if (lane == 0 && drow_lambda) drow_lambda[r] = -go2;
  }
}

// y (+)= float(x) over a (B, H) grid of T rows of D columns: y's (b, h) blocks bh_stride floats
// apart (q and k may be views), x's rows ld wide; x2, when given, is added (dv = dv1 + dv2).
__global__ void vendor_widen_kernel(float* y, size_t bh_stride, int T, int D, const uint16_t* x,
                                   const uint16_t* x2, int ld, size_t n) {
  TDA_GRID_STRIDE(i, n) {
    const size_t row = i / unsigned(D), c = i % unsigned(D);
    const size_t bh = row / unsigned(T), t = row % unsigned(T);
    float v = bf16_float(x[row * ld + c]);
    if (x2) v += bf16_float(x2[row * ld + c]);
    y[bh * bh_stride + t * D + c] = v;
  }
}

// Buffers after the operand copies, each 256-byte aligned (the primitive's operands must be at
// least 16-byte aligned; cuDNN prefers 128).
size_t round_up(size_t n) {
  return (n + 127) / 128 * 128;
}

struct Layout {
  size_t rows, nqk, nv;  // elements of one q/k copy and one v copy
  int ldqk, ldv, views;
};
Layout layout(const AttnArgs& a) {
  Layout l;
  l.rows = size_t(a.B) * a.H * a.T;
  l.ldqk = fa::bucket_dqk(a.Dqk);
  l.ldv = fa::bucket_dv(a.Dqk, a.Dv);
  l.nqk = round_up(l.rows * size_t(l.ldqk));
  l.nv = round_up(l.rows * size_t(l.ldv));
  l.views = attn_two_views(a.math) ? 2 : 1;
  return l;
}

void widen(float* y, size_t bh_stride, const AttnArgs& a, int D, const uint16_t* x,
           const uint16_t* x2, int ld, const char* what) {
  const size_t n = size_t(a.B) * a.H * a.T * size_t(D);
  check(launch<vendor_widen_kernel>(dim3(grid_for(n, kThreads)), dim3(kThreads), 0, stream(), y,
                                    bh_stride, a.T, D, x, x2, ld, n),
        what);
}
}  // namespace

SdpaShape vendor_shape(const AttnArgs& a) {
  SdpaShape s;
  s.B = a.B;
  s.H = a.H;
  s.T = a.T;
  s.ld_qk = fa::bucket_dqk(a.Dqk);
  s.ld_v = fa::bucket_dv(a.Dqk, a.Dv);
  s.scale = a.scale;
  return s;
}

std::string vendor_math_refusal(AttnMath m) {
  switch (m) {
    case AttnMath::kSoftmax:
    case AttnMath::kDiffSoftmax:
      return "";
    case AttnMath::kEntmax:
      return "its weights are alpha-entmax, a sparse threshold the fused softmax cannot produce";
    case AttnMath::kSoftplus:
      return "its weights are softplus normalised by their sum, not exp normalised by theirs";
    case AttnMath::kRelu:
    case AttnMath::kDiffRelu:
      return "its weights are rectified scores (ReLU), not normalised exponentials";
    case AttnMath::kThreshold:
    case AttnMath::kDiffThreshold:
      return "its weights are thresholded powers max(s - tau_i, 0)^p, not normalised exponentials";
  }
  return "unknown attention math";
}

std::string vendor_call_refusal(const AttnArgs& a) {
  const std::string m = vendor_math_refusal(a.math);
  if (!m.empty()) return m;
  if (a.survivors || a.tiles_skipped || a.tiles_total || a.entmax_threshold_tiles)
    return "the call counts survivors or tiles (diagnostics)";
  if (a.q_start != 0) return "the call computes only rows from q_start (KV-cache decoding)";
  if (fa::max_head_dim(a) > fa::kMaxHeadDim) return "head dim above 128";
  if (attn_two_views(a.math) && a.Dqk > fa::kMaxTwoViewDqk) return "two views above head dim 64";
  if (!attn_q_scale_ok(a)) return kAttnQScaleError;
  return "";
}

size_t vendor_scratch_halves(const AttnArgs& a, bool backward) {
  const Layout l = layout(a);
  const size_t operands = round_up(attention_operands_scratch(a, backward));
  if (!backward) return operands + l.views * l.nv;  // o (o1, o2)
  // o1 (o2, g2), then dq, dk and dv of one view at a time (and view 1's dv until view 2's joins it)
  return operands + (l.views == 2 ? 3 : 1) * l.nv + 2 * l.nqk + l.views * l.nv;
}

size_t vendor_scratch_floats(const AttnArgs& a) {
  return attn_two_views(a.math) ? 2 * round_up(layout(a).rows) : 0;  // lse1, lse2
}

void vendor_attention_forward(SdpaPrimitive& p, const AttnArgs& a, uint16_t* hs, float* fs) {
  TDA_CHECK(vendor_call_refusal(a).empty(), "cuda: vendor attention: " + vendor_call_refusal(a));
  const Layout l = layout(a);
  const SdpaShape s = vendor_shape(a);
  const fa::AttnBf16Operands in = attention_bf16_operands(a, hs, false);
  uint16_t* o1 = hs + round_up(attention_operands_scratch(a, false));
  if (l.views == 1) {
    p.forward(s, in.q, in.k, in.v, o1, a.stats);  // stats: (B, H, T, 1), the primitive's lse
  } else {
    uint16_t* o2 = o1 + l.nv;
    float* lse1 = fs;
    float* lse2 = fs + round_up(l.rows);
    p.forward(s, in.q, in.k, in.v, o1, lse1);
    p.forward(s, in.q2, in.k2, in.v, o2, lse2);
    check(launch<vendor_stats_kernel>(dim3(grid_for(l.rows, kThreads)), dim3(kThreads), 0,
                                      stream(), a.stats, lse1, lse2, l.rows),
          "vendor attention: stats");
  }
  const size_t n = l.rows * size_t(a.Dv);
  const uint16_t* o2 = l.views == 2 ? o1 + l.nv : nullptr;
  check(launch<vendor_merge_kernel>(dim3(grid_for(n, kThreads)), dim3(kThreads), 0, stream(),
                                    a.out, a.out2, o1, o2, a.lambda, a.Dv, l.ldv, n),
        "vendor attention: output");
}

void vendor_attention_backward(SdpaPrimitive& p, const AttnArgs& a, uint16_t* hs, float* fs) {
  TDA_CHECK(vendor_call_refusal(a).empty(), "cuda: vendor attention: " + vendor_call_refusal(a));
  const Layout l = layout(a);
  const SdpaShape s = vendor_shape(a);
  const fa::AttnBf16Operands in = attention_bf16_operands(a, hs, true);  // q, k, v (q2, k2), g
  uint16_t* o1 = hs + round_up(attention_operands_scratch(a, true));
  uint16_t* o2 = l.views == 2 ? o1 + l.nv : nullptr;
  uint16_t* g2 = l.views == 2 ? o1 + 2 * l.nv : nullptr;
  uint16_t* dq = o1 + (l.views == 2 ? 3 : 1) * l.nv;
  uint16_t* dk = dq + l.nqk;
  uint16_t* dv = dk + l.nqk;
  uint16_t* dv1 = dv + l.nv;  // two views: view 1's dv, kept for view 2's to join it
  const unsigned blocks = unsigned((l.rows * kWarp + kThreads - 1) / kThreads);
  if (l.views == 1)
    check(launch<vendor_backward_prep_kernel<false>>(
              dim3(blocks), dim3(kThreads), 0, stream(), o1, nullptr, nullptr, nullptr, a.out,
              nullptr, a.dout, nullptr, a.Dv, l.ldv, l.rows),
          "vendor attention: backward inputs");
  else
    check(launch<vendor_backward_prep_kernel<true>>(dim3(blocks), dim3(kThreads), 0, stream(), o1,
                                                    o2, g2, a.drow_lambda, a.out, a.out2, a.dout,
                                                    a.lambda, a.Dv, l.ldv, l.rows),
          "vendor attention: backward inputs");
  const size_t sqk = fa::qk_stride(a), sv = size_t(a.T) * a.Dv;
  if (l.views == 1) {
    p.backward(s, in.q, in.k, in.v, o1, in.g, a.stats, dq, dk, dv);
    widen(a.dq, sqk, a, a.Dqk, dq, nullptr, l.ldqk, "vendor attention: dq");
    widen(a.dk, sqk, a, a.Dqk, dk, nullptr, l.ldqk, "vendor attention: dk");
    widen(a.dv, sv, a, a.Dv, dv, nullptr, l.ldv, "vendor attention: dv");
    return;
  }
  // The forward's (lse1, lse2) pairs, back into one row of T per (b, h) and view.
  float* lse1 = fs;
  float* lse2 = fs + round_up(l.rows);
  const size_t n2 = l.rows;
  check(launch<vendor_split_stats_kernel>(dim3(grid_for(n2, kThreads)), dim3(kThreads), 0,
                                          stream(), lse1, lse2, a.stats, n2),
        "vendor attention: stats");
  p.backward(s, in.q, in.k, in.v, o1, in.g, lse1, dq, dk, dv1);
  widen(a.dq, sqk, a, a.Dqk, dq, nullptr, l.ldqk, "vendor attention: dq");
  widen(a.dk, sqk, a, a.Dqk, dk, nullptr, l.ldqk, "vendor attention: dk");
  p.backward(s, in.q2, in.k2, in.v, o2, g2, lse2, dq, dk, dv);
  widen(a.dq2, sqk, a, a.Dqk, dq, nullptr, l.ldqk, "vendor attention: dq2");
  widen(a.dk2, sqk, a, a.Dqk, dk, nullptr, l.ldqk, "vendor attention: dk2");
  widen(a.dv, sv, a, a.Dv, dv1, dv, l.ldv, "vendor attention: dv");
}

}  // namespace tda::cuda
