// The attention kernels' operands as bf16 copies (attention_tc.cuh, AttnBf16Operands): one cast
// per call, after which the kernels copy their tiles with cp.async, with no conversion in their
// key loops. y = bf16(x) is __float2bfloat16 (round to nearest even), the rounding each tile had
// when the kernels loaded fp32 and converted per tile: the tensor-core products are unchanged.
#include <algorithm>

#include "backend/cuda/attention_tc.cuh"
#include "backend/cuda/common.h"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"

namespace tda::cuda {

namespace {
constexpr int kCastThreads = 256;

// y: rows of ld bf16 per (b, h) (the head-dim bucket's width), the columns past D zero; x: T
// rows of D floats per (b, h), the (b, h) blocks bh_stride floats apart (q and k may be views
// into a wider buffer). With a row scale f (the queries' AttnArgs::q_scale; H heads, f_h_stride
// floats apart) y = bf16(f x): one fp32 product, rounded as a stored q' = f x would be.
__global__ void operand_to_bf16_kernel(uint16_t* y, int ld, const float* x, size_t bh_stride, int T,
                                       int D, size_t n, const float* f, int f_h_stride, int H) {
  TDA_GRID_STRIDE(i, n) {
    const int c = int(i % unsigned(ld));
    const size_t row = i / unsigned(ld), bh = row / unsigned(T), t = row % unsigned(T);
    float v = c < D ? x[bh * bh_stride + t * D + c] : 0.f;
    if (f) v = f[size_t(bh % unsigned(H)) * f_h_stride + t] * v;
    y[i] = c < D ? fa::bf16_bits(v) : uint16_t(0);
  }
}

// Where each copy starts, in bf16 elements from the first (a.saved, or the call's scratch): q, k,
// v (q2, k2) in that order, rows of the head-dim bucket's width. operands_end: past the last.
size_t operand_offset(const AttnArgs& a, AttnOperand which) {
  const size_t rows = size_t(a.B) * a.H * a.T;
  const size_t nqk = rows * size_t(fa::bucket_dqk(a.Dqk));
  const size_t nv = rows * size_t(fa::bucket_dv(a.Dqk, a.Dv));
  const size_t at[] = {0, nqk, 2 * nqk, 2 * nqk + nv, 3 * nqk + nv};
  return at[int(which)];
}
size_t operands_end(const AttnArgs& a) {
  const size_t rows = size_t(a.B) * a.H * a.T;
  const size_t views = attn_two_views(a.math) ? 2 : 1;
  return rows * (2 * views * size_t(fa::bucket_dqk(a.Dqk)) + size_t(fa::bucket_dv(a.Dqk, a.Dv)));
}
}  // namespace

size_t attention_operands_scratch(const AttnArgs& a, bool with_dout) {
  const size_t ldv = size_t(fa::bucket_dv(a.Dqk, a.Dv));
  const size_t dout = with_dout ? size_t(a.B) * a.H * a.T * ldv : 0;
  // + padding: load_tile_async's zero-filled copies still address up to a tile's rows - 1 past
  // the last matrix (the 128-key tiles serve head dims <= 64 alone: attn_forward_shape)
  const size_t tile_rows = ldv == 64 ? fa::kMaxTileRows : fa::kTile;
  const size_t pad = tile_rows * std::max(size_t(fa::bucket_dqk(a.Dqk)), ldv) + 128;
  if (a.saved) return with_dout ? dout + pad : 0;  // q, k, v's copies live in a.saved
  return operands_end(a) + dout + pad;
}

fa::AttnBf16Operands attention_bf16_operands(const AttnArgs& a, uint16_t* scratch, bool with_dout) {
  fa::AttnBf16Operands o;
  const int ldqk = fa::bucket_dqk(a.Dqk), ldv = fa::bucket_dv(a.Dqk, a.Dv);
  // load_tile_async addresses a (b, h) matrix with 32-bit offsets, up to a tile past its end
  TDA_CHECK((size_t(a.T) + fa::kMaxTileRows) * size_t(std::max(ldqk, ldv)) < (size_t(1) << 31),
            "cuda: attention: T = " + std::to_string(a.T) +
                " is too long for the kernels' 32-bit row offsets (T x head dim < 2^31)");
  const size_t rows = size_t(a.B) * a.H * a.T;
  // q, k, v (q2, k2), in a.saved when the kind keeps them (attention_saved_operands). The
  // backward of a forward that saved them reads the forward's copies: the same bits a cast of
  // the same q, k, v would give, with no pass.
  const bool cast_qkv = !(a.saved && with_dout);
  auto take = [&](bool run, uint16_t* y, const float* x, size_t bh_stride, int D, int ld,
                  const float* f) {
    const size_t n = rows * size_t(ld);
    if (run)
      check(launch<operand_to_bf16_kernel>(dim3(grid_for(n, kCastThreads)), dim3(kCastThreads), 0,
                                           stream(), y, ld, x, bh_stride, a.T, D, n, f,
                                           a.q_scale_h_stride, a.H),
            "attention operand cast to bf16");
    return static_cast<const uint16_t*>(y);
  };
  uint16_t* base = a.saved ? a.saved : scratch;
  auto at = [&](AttnOperand w) { return base + operand_offset(a, w); };
  const size_t sqk = fa::qk_stride(a), sv = size_t(a.T) * a.Dv;
  o.q = take(cast_qkv, at(AttnOperand::kQ), a.q, sqk, a.Dqk, ldqk, a.q_scale);
  o.k = take(cast_qkv, at(AttnOperand::kK), a.k, sqk, a.Dqk, ldqk, nullptr);
  o.v = take(cast_qkv, at(AttnOperand::kV), a.v, sv, a.Dv, ldv, nullptr);
  if (attn_two_views(a.math)) {
    o.q2 = take(cast_qkv, at(AttnOperand::kQ2), a.q2, sqk, a.Dqk, ldqk, nullptr);
    o.k2 = take(cast_qkv, at(AttnOperand::kK2), a.k2, sqk, a.Dqk, ldqk, nullptr);
  }
  if (with_dout)  // dO's copy is the backward's own, in scratch, after q, k, v's when they are
    o.g = take(true, a.saved ? scratch : scratch + operands_end(a), a.dout, sv, a.Dv, ldv, nullptr);
  return o;
}

void attention_l2norm_backward_saved(float* dx, const AttnArgs& a, AttnOperand which,
                                     const float* norm) {
  TDA_CHECK(a.saved && which != AttnOperand::kV && (attn_two_views(a.math) || int(which) < 2),
            "cuda: l2norm_backward_saved: no such copy of q or k in AttnArgs::saved");
  TDA_CHECK(fa::qk_stride(a) == size_t(a.T) * a.Dqk,
            "cuda: l2norm_backward_saved: q and k in the compact layout only");
  const uint16_t* copy = a.saved + operand_offset(a, which);
  const auto* xhat = reinterpret_cast<const __nv_bfloat16*>(copy);
  l2norm_backward(dx, xhat, fa::bucket_dqk(a.Dqk), norm, size_t(a.B) * a.H * a.T, a.Dqk);
}

}  // namespace tda::cuda
