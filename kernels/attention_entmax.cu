// Causal 1.5-entmax attention, streaming (no T x T buffer, no per-row score buffer): one warp per
// query row (forward, dq) or key row (dk, dv), keys in chunks of 32 (lane l scores key j0 + l),
// fp32 CUDA cores. The threshold is found by passes over the key chunks, as AdaSplash does:
// the row is recomputed on every pass instead of stored. Reference: attention_entmax.cpp.
//   u_j = z_j / 2 = scale q.k_j / 2 (j <= i);  m = max u;  f(tau) = sum_j [u_j - tau]_+^2 - 1
//   bisection on [m - 1, m - 1/sqrt(n)] (f(lo) >= 0 >= f(hi)), `entmax_iters` passes (the
//   policies.h Entmax15::bisect sequence);
//   entmax_bisect: tau = last midpoint, norm = f(tau) + 1 (the CPU's bisection solver)
//   exact (default): one more pass gathers k, sum u, sum u^2 over the support S = {u_j > tau};
//     then tau = M - sqrt(max(1/k - (Q - M^2), 0)) (M, Q means over S), norm = 1: the closed form
//     of the sort-based solver, exact once bisection has found the support.
//   forward:  p_ij = [u_ij - tau_i]_+^2 / norm_i;  o_i = sum_j p_ij v_j;  stats (tau_i, norm_i)
//   backward: e_ij = g_i.v_j;  c_i = sum_j sqrt(p_ij) e_ij / sum_j sqrt(p_ij)   (dq kernel, saved)
//             dz_ij = sqrt(p_ij) (e_ij - c_i);  dq_i = scale sum_j dz_ij k_j
//             dk_j = scale sum_i dz_ij q_i;  dv_j = sum_i p_ij g_i                (dkdv kernel)
// Every output is owned by one warp and summed in a fixed order: deterministic, no atomics.
#include "attention/policies.h"
#include "backend/cuda/attention_tc.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gemm.h"
#include "core/error.h"

namespace tda::cuda {

namespace {
constexpr int kRows = 4;  // warps (rows) per block
constexpr int kMaxD = fa::kMaxHeadDim;
constexpr int kPer = kMaxD / kWarp;  // channels per lane

__device__ inline float dot_shared(const float* sh, const float* g, int D) {
  float s = 0.f;
  for (int d = 0; d < D; ++d) s += sh[d] * g[d];
  return s;
}

// u_j for this lane's key of chunk j0 (-inf past the diagonal).
__device__ inline float half_score(const AttnArgs& a, const float* sq, const float* k, int i,
                                   int j) {
  return j <= i ? 0.5f * a.scale * dot_shared(sq, k + size_t(j) * a.Dqk, a.Dqk) : -INFINITY;
}

__global__ void __launch_bounds__(kRows* kWarp) entmax_forward_kernel(AttnArgs a, size_t sqk) {
  __shared__ float sq[kRows][kMaxD];
  __shared__ float sp[kRows][kWarp];
  const int w = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int T = a.T, Dk = a.Dqk, Dv = a.Dv;
  const size_t row = size_t(blockIdx.x) * kRows + w;
  if (row >= size_t(a.B) * a.H * T) return;  // the whole warp leaves
  const size_t bh = row / T;
  const int i = int(row % T), n = i + 1;
  if (i < a.q_start) {  // KV-cache decoding: row not computed (output 0, stats untouched)
    for (int d = lane; d < Dv; d += kWarp) a.out[row * Dv + d] = 0.f;
    return;
  }
  const float* k = a.k + bh * sqk;
  const float* v = a.v + bh * size_t(T) * Dv;
  for (int d = lane; d < Dk; d += kWarp) sq[w][d] = a.q[bh * sqk + size_t(i) * Dk + d];
  __syncwarp();
  float m = -INFINITY;
  for (int j0 = 0; j0 <= i; j0 += kWarp) m = fmaxf(m, half_score(a, sq[w], k, i, j0 + lane));
  m = warp_max(m);
  // f(tau) + 1 = sum [u - tau]_+^2, and the support's size and moments, in one pass
  auto pass = [&](float tau, float* cnt, float* su, float* su2) {
    float f = 0.f, c = 0.f, s1 = 0.f, s2 = 0.f;
    for (int j0 = 0; j0 <= i; j0 += kWarp) {
      const float u = half_score(a, sq[w], k, i, j0 + lane), r = u - tau;
      if (r > 0.f) f += r * r, c += 1.f, s1 += u, s2 += u * u;
    }
    if (cnt) *cnt = warp_sum(c), *su = warp_sum(s1), *su2 = warp_sum(s2);
    return warp_sum(f);
  };
  float lo = m - 1.f, hi = m - 1.f / sqrtf(float(n));
  const float f_lo = pass(lo, nullptr, nullptr, nullptr) - 1.f;
  float tau = lo;
  for (int it = 0; it < a.entmax_iters; ++it) {
    tau = 0.5f * (lo + hi);
    if ((pass(tau, nullptr, nullptr, nullptr) - 1.f) * f_lo >= 0.f)
      lo = tau;
    else
      hi = tau;
  }
  float norm = 1.f;
  if (a.entmax_bisect) {
    norm = pass(tau, nullptr, nullptr, nullptr);
  } else {
    float cnt, su, su2;
    pass(tau, &cnt, &su, &su2);
    if (cnt > 0.f) {
      const float M = su / cnt, Q = su2 / cnt;
      tau = M - sqrtf(fmaxf(1.f / cnt - (Q - M * M), 0.f));
    }
  }
  float acc[kPer];
  TDA_UNROLL
  for (int r = 0; r < kPer; ++r) acc[r] = 0.f;
  float surv = 0.f;
  for (int j0 = 0; j0 <= i; j0 += kWarp) {
    const float u = half_score(a, sq[w], k, i, j0 + lane);
    const float p = attn::Entmax15::prob(2.f * u, tau, norm);
    surv += (p != 0.f);
    sp[w][lane] = p;
    __syncwarp();
    const int nj = min(kWarp, i - j0 + 1);
    TDA_UNROLL
    for (int r = 0; r < kPer; ++r) {
      const int d = lane + r * kWarp;
      if (d < Dv)
        for (int jj = 0; jj < nj; ++jj)
          if (sp[w][jj] != 0.f) acc[r] += sp[w][jj] * v[size_t(j0 + jj) * Dv + d];
    }
    __syncwarp();  // sp is rewritten by the next chunk
  }
  surv = warp_sum(surv);
  TDA_UNROLL
  for (int r = 0; r < kPer; ++r) {
    const int d = lane + r * kWarp;
    if (d < Dv) a.out[row * Dv + d] = acc[r];
  }
  if (lane == 0) {
    a.stats[row * 2] = tau;
    a.stats[row * 2 + 1] = norm;
    if (a.survivors) a.survivors[row] = surv;
  }
}

// dq_i, and c_i saved to cbuf for the dkdv kernel.
__global__ void __launch_bounds__(kRows* kWarp)
    entmax_dq_kernel(AttnArgs a, size_t sqk, float* cbuf) {
  __shared__ float sq[kRows][kMaxD];
  __shared__ float sg[kRows][kMaxD];
  __shared__ float sds[kRows][kWarp];
  const int w = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int T = a.T, Dk = a.Dqk, Dv = a.Dv;
  const size_t row = size_t(blockIdx.x) * kRows + w;
  if (row >= size_t(a.B) * a.H * T) return;
  const size_t bh = row / T;
  const int i = int(row % T);
  const float* k = a.k + bh * sqk;
  const float* v = a.v + bh * size_t(T) * Dv;
  for (int d = lane; d < Dk; d += kWarp) sq[w][d] = a.q[bh * sqk + size_t(i) * Dk + d];
  for (int d = lane; d < Dv; d += kWarp) sg[w][d] = a.dout[row * Dv + d];
  __syncwarp();
  const float tau = a.stats[row * 2], norm = a.stats[row * 2 + 1];
  float G = 0.f, Ge = 0.f;
  for (int j0 = 0; j0 <= i; j0 += kWarp) {
    const int j = j0 + lane;
    const float p = attn::Entmax15::prob(2.f * half_score(a, sq[w], k, i, j), tau, norm);
    if (p != 0.f) {
      const float sp = sqrtf(p);
      G += sp;
      Ge += sp * dot_shared(sg[w], v + size_t(j) * Dv, Dv);
    }
  }
  G = warp_sum(G);
  Ge = warp_sum(Ge);
  const float c = a.debug_drop_term ? 0.f : Ge / G;  // G > 0: the support is never empty
  if (lane == 0) cbuf[row] = c;
  float acc[kPer];
  TDA_UNROLL
  for (int r = 0; r < kPer; ++r) acc[r] = 0.f;
  for (int j0 = 0; j0 <= i; j0 += kWarp) {
    const int j = j0 + lane;
    const float p = attn::Entmax15::prob(2.f * half_score(a, sq[w], k, i, j), tau, norm);
    float dz = 0.f;
    if (p != 0.f) dz = sqrtf(p) * (dot_shared(sg[w], v + size_t(j) * Dv, Dv) - c) * a.scale;
    sds[w][lane] = dz;
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

__global__ void __launch_bounds__(kRows* kWarp)
    entmax_dkdv_kernel(AttnArgs a, size_t sqk, const float* cbuf) {
  __shared__ float sk[kRows][kMaxD];
  __shared__ float sv[kRows][kMaxD];
  __shared__ float sp[kRows][kWarp];
  __shared__ float sds[kRows][kWarp];
  const int w = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int T = a.T, Dk = a.Dqk, Dv = a.Dv;
  const size_t krow = size_t(blockIdx.x) * kRows + w;  // (b*H + h)*T + j
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
  for (int r = 0; r < kPer; ++r) acck[r] = accv[r] = 0.f;
  for (int i0 = j; i0 < T; i0 += kWarp) {
    const int i = i0 + lane;
    float p = 0.f, dz = 0.f;
    if (i < T) {
      const size_t r = bh * T + i;
      const float z = a.scale * dot_shared(sk[w], q + size_t(i) * Dk, Dk);
      p = attn::Entmax15::prob(z, a.stats[r * 2], a.stats[r * 2 + 1]);
      if (p != 0.f) dz = sqrtf(p) * (dot_shared(sv[w], g + size_t(i) * Dv, Dv) - cbuf[r]) * a.scale;
    }
    sp[w][lane] = p;
    sds[w][lane] = dz;
    __syncwarp();
    const int ni = min(kWarp, T - i0);
    TDA_UNROLL
    for (int r = 0; r < kPer; ++r) {
      const int d = lane + r * kWarp;
      for (int ii = 0; ii < ni; ++ii) {
        if (d < Dv) accv[r] += sp[w][ii] * g[size_t(i0 + ii) * Dv + d];
        if (d < Dk) acck[r] += sds[w][ii] * q[size_t(i0 + ii) * Dk + d];
      }
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

unsigned row_blocks(const AttnArgs& a) {
  return unsigned((size_t(a.B) * a.H * a.T + kRows - 1) / kRows);
}
}  // namespace

void attention_entmax_forward(const AttnArgs& a) {
  if (size_t(a.B) * a.H * a.T == 0) return;
  check(launch(entmax_forward_kernel, dim3(row_blocks(a)), dim3(kRows * kWarp), 0, stream(), a,
               fa::qk_stride(a)),
        "attention_entmax_forward");
}

void attention_entmax_backward(const AttnArgs& a, float* scratch) {
  if (size_t(a.B) * a.H * a.T == 0) return;
  check(launch(entmax_dq_kernel, dim3(row_blocks(a)), dim3(kRows * kWarp), 0, stream(), a,
               fa::qk_stride(a), scratch),
        "attention_entmax_dq");
  check(launch(entmax_dkdv_kernel, dim3(row_blocks(a)), dim3(kRows * kWarp), 0, stream(), a,
               fa::qk_stride(a), static_cast<const float*>(scratch)),
        "attention_entmax_dkdv");
}

}  // namespace tda::cuda
