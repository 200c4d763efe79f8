// Causal softmax attention, streaming (no T x T buffer), one warp per row; the reference is the
// kSoftmax path of src/backend/cpu/attention_stream.cpp. Per (b, h), with s_ij = scale q_i.k_j
// for j <= i:
//   forward:   online softmax over key chunks of 32 (lane l scores key j0 + l):
//                m' = max(m, max_j s_ij);  l' = l e^(m - m') + sum_j e^(s_ij - m');
//                o' = o e^(m - m') + sum_j e^(s_ij - m') v_j;   out_i = o / l;  LSE_i = m + log l
//   backward:  p_ij = exp(s_ij - LSE_i);  D_i = g_i.o_i;  e_ij = g_i.v_j;  ds_ij = p_ij (e_ij -
//   D_i)
//              dq_i = scale sum_{j<=i} ds_ij k_j          (dq kernel: one warp per query row)
//              dk_j = scale sum_{i>=j} ds_ij q_i;  dv_j = sum_{i>=j} p_ij g_i
//                                                          (dkdv kernel: one warp per key row)
// Every output element is owned by one lane and summed in a fixed order: no atomics,
// deterministic. Head dims up to kMaxD; lane l owns channels l, l+32, ... of its row.
// This is the simple correct version; a FlashAttention-2 tensor-core kernel (mma.h) is the next
// step (docs/cuda.md).
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gemm.h"
#include "core/error.h"

namespace tda::cuda {

namespace {
constexpr int kWarps = 4;  // rows per block
constexpr int kMaxD = 256;
constexpr int kPer = kMaxD / kWarp;  // channels per lane

size_t qk_stride(const AttnArgs& a) {
  return a.qk_bh_stride ? a.qk_bh_stride : size_t(a.T) * a.Dqk;
}

__device__ inline float dot_shared(const float* sh, const float* g, int D) {
  float s = 0.0f;
  for (int d = 0; d < D; ++d) s += sh[d] * g[d];
  return s;
}

__global__ void __launch_bounds__(kWarps* kWarp)
    attn_softmax_forward_kernel(AttnArgs a, size_t sqk) {
  __shared__ float sq[kWarps][kMaxD];
  __shared__ float sp[kWarps][kWarp];
  const int w = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int T = a.T, Dk = a.Dqk, Dv = a.Dv;
  const size_t row = size_t(blockIdx.x) * kWarps + w;  // (b*H + h)*T + i
  if (row >= size_t(a.B) * a.H * T) return;            // the whole warp leaves
  const size_t bh = row / T;
  const int i = int(row % T);
  const float* q = a.q + bh * sqk + size_t(i) * Dk;
  const float* k = a.k + bh * sqk;
  const float* v = a.v + bh * size_t(T) * Dv;
  for (int d = lane; d < Dk; d += kWarp) sq[w][d] = q[d];
  __syncwarp();
  float m = -INFINITY, l = 0.0f;
  float acc[kPer];
  TDA_UNROLL
  for (int r = 0; r < kPer; ++r) acc[r] = 0.0f;
  for (int j0 = 0; j0 <= i; j0 += kWarp) {
    const int j = j0 + lane;
    const float s = j <= i ? a.scale * dot_shared(sq[w], k + size_t(j) * Dk, Dk) : -INFINITY;
    const float m_new = fmaxf(m, warp_max(s));  // finite: key j0 <= i is always present
    const float corr = expf(m - m_new);         // 0 on the first chunk (m = -inf)
    const float p = j <= i ? expf(s - m_new) : 0.0f;
    l = l * corr + warp_sum(p);
    sp[w][lane] = p;
    __syncwarp();
    const int nj = min(kWarp, i - j0 + 1);
    TDA_UNROLL
    for (int r = 0; r < kPer; ++r) {
      const int d = lane + r * kWarp;
      if (d < Dv) {
        float o = acc[r] * corr;
        for (int jj = 0; jj < nj; ++jj) o += sp[w][jj] * v[size_t(j0 + jj) * Dv + d];
        acc[r] = o;
      }
    }
    __syncwarp();  // sp is rewritten by the next chunk
    m = m_new;
  }
  const float inv = 1.0f / l;
  TDA_UNROLL
  for (int r = 0; r < kPer; ++r) {
    const int d = lane + r * kWarp;
    if (d < Dv) a.out[row * Dv + d] = acc[r] * inv;
  }
  if (lane == 0) a.stats[row] = m + logf(l);
}

// dq_i, and D_i = g_i.o_i saved to Dbuf for the dkdv kernel.
__global__ void __launch_bounds__(kWarps* kWarp)
    attn_softmax_dq_kernel(AttnArgs a, size_t sqk, float* Dbuf) {
  __shared__ float sq[kWarps][kMaxD];
  __shared__ float sg[kWarps][kMaxD];
  __shared__ float sds[kWarps][kWarp];
  const int w = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int T = a.T, Dk = a.Dqk, Dv = a.Dv;
  const size_t row = size_t(blockIdx.x) * kWarps + w;
  if (row >= size_t(a.B) * a.H * T) return;
  const size_t bh = row / T;
  const int i = int(row % T);
  const float* q = a.q + bh * sqk + size_t(i) * Dk;
  const float* k = a.k + bh * sqk;
  const float* v = a.v + bh * size_t(T) * Dv;
  const float* g = a.dout + row * Dv;
  const float* o = a.out + row * Dv;
  float Di = 0.0f;
  for (int d = lane; d < Dk; d += kWarp) sq[w][d] = q[d];
  for (int d = lane; d < Dv; d += kWarp) {
    sg[w][d] = g[d];
    Di += g[d] * o[d];
  }
  Di = a.debug_drop_term ? 0.0f : warp_sum(Di);
  if (lane == 0) Dbuf[row] = Di;
  __syncwarp();
  const float lse = a.stats[row];
  float acc[kPer];
  TDA_UNROLL
  for (int r = 0; r < kPer; ++r) acc[r] = 0.0f;
  for (int j0 = 0; j0 <= i; j0 += kWarp) {
    const int j = j0 + lane;
    float ds = 0.0f;
    if (j <= i) {
      const float p = expf(a.scale * dot_shared(sq[w], k + size_t(j) * Dk, Dk) - lse);
      const float e = dot_shared(sg[w], v + size_t(j) * Dv, Dv);
      ds = a.scale * (p * (e - Di));
    }
    sds[w][lane] = ds;
    __syncwarp();
    const int nj = min(kWarp, i - j0 + 1);
    TDA_UNROLL
    for (int r = 0; r < kPer; ++r) {
      const int d = lane + r * kWarp;
      if (d < Dk)
        for (int jj = 0; jj < nj; ++jj) acc[r] += sds[w][jj] * k[size_t(j0 + jj) * Dk + d];
    }
    __syncwarp();
  }
  float* dq = a.dq + bh * sqk + size_t(i) * Dk;
  TDA_UNROLL
  for (int r = 0; r < kPer; ++r) {
    const int d = lane + r * kWarp;
    if (d < Dk) dq[d] = acc[r];
  }
}

__global__ void __launch_bounds__(kWarps* kWarp)
    attn_softmax_dkdv_kernel(AttnArgs a, size_t sqk, const float* Dbuf) {
  __shared__ float sk[kWarps][kMaxD];
  __shared__ float sv[kWarps][kMaxD];
  __shared__ float sp[kWarps][kWarp];
  __shared__ float sds[kWarps][kWarp];
  const int w = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int T = a.T, Dk = a.Dqk, Dv = a.Dv;
  const size_t krow = size_t(blockIdx.x) * kWarps + w;  // (b*H + h)*T + j
  if (krow >= size_t(a.B) * a.H * T) return;
  const size_t bh = krow / T;
  const int j = int(krow % T);
  const float* q = a.q + bh * sqk;
  const float* g = a.dout + bh * size_t(T) * Dv;
  for (int d = lane; d < Dk; d += kWarp) sk[w][d] = a.k[bh * sqk + size_t(j) * Dk + d];
  for (int d = lane; d < Dv; d += kWarp) sv[w][d] = a.v[bh * size_t(T) * Dv + size_t(j) * Dv + d];
  __syncwarp();
  float acck[kPer], accv[kPer];
  TDA_UNROLL
  for (int r = 0; r < kPer; ++r) acck[r] = accv[r] = 0.0f;
  for (int i0 = j; i0 < T; i0 += kWarp) {
    const int i = i0 + lane;
    float p = 0.0f, ds = 0.0f;
    if (i < T) {
      const size_t row = bh * T + i;
      p = expf(a.scale * dot_shared(sk[w], q + size_t(i) * Dk, Dk) - a.stats[row]);
      const float e = dot_shared(sv[w], g + size_t(i) * Dv, Dv);
      ds = a.scale * (p * (e - Dbuf[row]));
    }
    sp[w][lane] = p;
    sds[w][lane] = ds;
    __syncwarp();
    const int ni = min(kWarp, T - i0);
    const float* gi = g + size_t(i0) * Dv;
    const float* qi = q + size_t(i0) * Dk;
    TDA_UNROLL
    for (int r = 0; r < kPer; ++r) {
      const int d = lane + r * kWarp;
      if (d < Dv)
        for (int ii = 0; ii < ni; ++ii) accv[r] += sp[w][ii] * gi[ii * Dv + d];
    }
    TDA_UNROLL
    for (int r = 0; r < kPer; ++r) {
      const int d = lane + r * kWarp;
      if (d < Dk)
        for (int ii = 0; ii < ni; ++ii) acck[r] += sds[w][ii] * qi[ii * Dk + d];
    }
    __syncwarp();
  }
  float* dk = a.dk + bh * sqk + size_t(j) * Dk;
  float* dv = a.dv + krow * Dv;
  TDA_UNROLL
  for (int r = 0; r < kPer; ++r) {
    const int d = lane + r * kWarp;
    if (d < Dk) dk[d] = acck[r];
    if (d < Dv) dv[d] = accv[r];
  }
}

void check_softmax_args(const AttnArgs& a) {
  TDA_CHECK(a.math == AttnMath::kSoftmax,
            "cuda backend: only softmax attention is implemented (the other kinds are issue 6)");
  TDA_CHECK(a.q && a.k && a.v && a.out && a.stats, "attention: q, k, v, out and stats required");
  TDA_CHECK(a.Dqk <= kMaxD && a.Dv <= kMaxD,
            "cuda backend: attention head dim above " + std::to_string(kMaxD));
}

unsigned row_blocks(const AttnArgs& a) {
  return unsigned((size_t(a.B) * a.H * a.T + kWarps - 1) / kWarps);
}
}  // namespace

void attention_softmax_forward(const AttnArgs& a) {
  check_softmax_args(a);
  if (size_t(a.B) * a.H * a.T == 0) return;
  check(launch(attn_softmax_forward_kernel, dim3(row_blocks(a)), dim3(kWarps * kWarp), 0, stream(),
               a, qk_stride(a)),
        "attention_softmax_forward");
}

void attention_softmax_backward(const AttnArgs& a, float* scratch) {
  check_softmax_args(a);
  TDA_CHECK(a.dout && a.dq && a.dk && a.dv, "attention: backward needs dout, dq, dk, dv");
  if (size_t(a.B) * a.H * a.T == 0) return;
  check(launch(attn_softmax_dq_kernel, dim3(row_blocks(a)), dim3(kWarps * kWarp), 0, stream(), a,
               qk_stride(a), scratch),
        "attention_softmax_dq");
  check(launch(attn_softmax_dkdv_kernel, dim3(row_blocks(a)), dim3(kWarps * kWarp), 0, stream(), a,
               qk_stride(a), static_cast<const float*>(scratch)),
        "attention_softmax_dkdv");
}

}  // namespace tda::cuda
