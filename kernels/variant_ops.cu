// Pre/post pieces of the attention variants (attention-variants.md §0.1), as
// src/backend/cpu/variant_ops.cpp; backend/ops.h documents each op. Row ops run one warp per
// row; reductions over tokens run in a fixed order (warp butterflies, per-chunk partials summed
// in order), never with float atomics, so results are deterministic.
//   l2norm:       x~ = x / max(|x|, 1e-12);  dx = (dx~ - x~ (x~.dx~)) / |x|  (x~ fp32 or bf16)
//   head_row_sum: dst[h] += scale sum_{b,t} w[t] x[(b H + h) T + t]   (double accumulation, two
//                 passes over many blocks: fixed chunks of (b, t) items, then the chunks in order)
//   threshold_tau: tau_i = max(beta, 0) c_i (or [beta > 0] c_i), c_i = sqrt(2 log+((i+1)/kappa)/d)
//   sigmoid gate: y *= gam = sigmoid(z);  g = dy gam,  dz = sum_{group} dy o gam (1 - gam)
//   ReLA norm:    r = sqrt(mean((u - mu)^2) + eps),  y = gamma (u - mu) / r * [sigmoid(w u)]
#include "attention/policies.h"
#include "backend/cuda/common.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/grid.h"
#include "backend/cuda/kernel_helpers.cuh"

namespace tda::cuda {

namespace {
constexpr int kThreads = 256;
constexpr int kRowsPerBlock = 4;   // warps (rows) per block of the row kernels
constexpr int kNormThreads = 128;  // one block per token in the ReLA norm

__device__ inline int warp_row() {
  return int(blockIdx.x) * kRowsPerBlock + int(threadIdx.x) / kWarp;
}

unsigned row_blocks(size_t N) {
  return unsigned((N + kRowsPerBlock - 1) / kRowsPerBlock);
}

__global__ void l2norm_forward_kernel(float* x, float* norm, size_t N, int D) {
  const int lane = threadIdx.x % kWarp;
  const size_t n = size_t(warp_row());
  if (n >= N) return;  // whole warps leave together
  float* r = x + n * D;
  float ss = 0.f;
  for (int d = lane; d < D; d += kWarp) ss += r[d] * r[d];
  const float nrm = sqrtf(warp_sum(ss));
  const float inv = 1.f / fmaxf(nrm, 1e-12f);
  for (int d = lane; d < D; d += kWarp) r[d] *= inv;
  if (lane == 0) norm[n] = nrm;
}

__device__ inline float as_float(float x) {
  return x;
}
__device__ inline float as_float(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

// x~ as X (float, or bf16: an attention operand copy), rows ld elements apart; dx rows of D.
template <class X>
__global__ void l2norm_backward_kernel(float* dx, const X* xhat, int ld, const float* norm,
                                       size_t N, int D) {
  const int lane = threadIdx.x % kWarp;
  const size_t n = size_t(warp_row());
  if (n >= N) return;
  float* g = dx + n * D;
  const X* xh = xhat + n * ld;
  if (norm[n] > 1e-12f) {
    float p = 0.f;
    for (int d = lane; d < D; d += kWarp) p += as_float(xh[d]) * g[d];
    p = warp_sum(p);  // every lane has it before any lane writes g
    const float inv = 1.f / norm[n];
    for (int d = lane; d < D; d += kWarp) g[d] = (g[d] - as_float(xh[d]) * p) * inv;
  } else {
    for (int d = lane; d < D; d += kWarp) g[d] *= 1e12f;  // the clamp is active: linear
  }
}

// a as X (float, or bf16: ssmax's stored q), both N rows of D.
template <class X>
__global__ void row_dot_kernel(float* out, const X* a, const float* b, size_t N, int D) {
  const int lane = threadIdx.x % kWarp;
  const size_t n = size_t(warp_row());
  if (n >= N) return;
  float s = 0.f;
  for (int d = lane; d < D; d += kWarp) s += as_float(a[n * D + d]) * b[n * D + d];
  s = warp_sum(s);
  if (lane == 0) out[n] = s;
}

// Pass 1, block (chunk, h): the (b, t) items [chunk per, (chunk + 1) per) of head h, thread i
// taking every blockDim-th from the i-th (a fixed split), block-summed in double.
__global__ void head_row_sum_partial_kernel(double* partial, const float* x, const float* w, int B,
                                            int H, int T, size_t per, int chunks) {
  __shared__ double smem[32];
  const int h = blockIdx.y;
  const size_t items = size_t(B) * T, i0 = size_t(blockIdx.x) * per;
  const size_t i1 = i0 + per < items ? i0 + per : items;
  double s = 0.0;
  for (size_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
    const size_t b = i / T, t = i % T;
    s += (w ? double(w[t]) : 1.0) * double(x[(b * H + h) * T + t]);
  }
  s = block_sum(s, smem);
  if (threadIdx.x == 0) partial[size_t(h) * chunks + blockIdx.x] = s;
}

// Pass 2, block h: head h's <= kRowSumMaxChunks partials in a fixed split and tree order.
__global__ void head_row_sum_kernel(float* dst, const double* partial, int chunks, float scale) {
  __shared__ double smem[32];
  const int h = blockIdx.x;
  double s = 0.0;
  for (int i = threadIdx.x; i < chunks; i += blockDim.x) s += partial[size_t(h) * chunks + i];
  s = block_sum(s, smem);
  if (threadIdx.x == 0) dst[h] += float(double(scale) * s);
}

// head_row_sum's first pass: items per block (at least `items_per_block`, more when the chunks
// would pass kRowSumMaxChunks, the second pass's length) and the number of chunks.
constexpr int kRowSumMaxChunks = 1024;
size_t row_sum_per(size_t items, int items_per_block) {
  const size_t least = (items + kRowSumMaxChunks - 1) / kRowSumMaxChunks;
  return std::max<size_t>({size_t(1), size_t(items_per_block), least});
}
int row_sum_chunks(size_t items, int items_per_block) {
  const size_t per = row_sum_per(items, items_per_block);
  return int((items + per - 1) / per);
}

__global__ void threshold_tau_kernel(float* out, const float* beta, float beta_fixed,
                                     bool derivative, int T, double kappa, int d) {
  const float b = beta ? *beta : beta_fixed;
  const float g = derivative ? (b > 0.f ? 1.f : 0.f) : fmaxf(b, 0.f);
  TDA_GRID_STRIDE(i, size_t(T)) out[i] = g * attn::threshold_c(int(i), kappa, d);
}

// Element c = h D + d of token n = b T + t (rows of C = H D) in head layout (b, h, t, d).
__device__ inline size_t head_index(size_t n, int c, int T, int H, int D) {
  const size_t b = n / T;
  const int t = int(n % T), h = c / D, d = c % D;
  return ((b * H + h) * T + t) * D + d;
}

// y (rows) = o (heads) gam: one thread per element of y, in y's order (writes coalesce; o is read
// D contiguous floats per (token, head)).
__global__ void sigmoid_gate_forward_kernel(float* y, const float* o, const float* z, int z_stride,
                                            int N, int T, int H, int D, int group) {
  const int C = H * D;
  const size_t total = size_t(N) * C;
  TDA_GRID_STRIDE(i, total) {
    const size_t n = i / C;
    const int c = int(i % C);
    y[i] = o[head_index(n, c, T, H, D)] * attn::sigmoid(z[n * z_stride + c / group]);
  }
}

// One gate per channel: every element on its own.
__global__ void sigmoid_gate_backward_kernel(float* g, float* dz, int dz_stride, const float* dy,
                                             const float* o, const float* z, int z_stride, int N,
                                             int T, int H, int D) {
  const int C = H * D;
  const size_t total = size_t(N) * C;
  TDA_GRID_STRIDE(i, total) {
    const size_t n = i / C;
    const int c = int(i % C);
    const size_t hi = head_index(n, c, T, H, D);
    const float gam = attn::sigmoid(z[n * z_stride + c]);
    const float d = dy[i] * o[hi] * gam * (1.f - gam);
    g[hi] = dy[i] * gam;
    dz[n * dz_stride + c] = d;
  }
}

// One gate per `group` channels (headwise): one warp per (token, gate), warp-summed.
__global__ void sigmoid_gate_backward_grouped_kernel(float* g, float* dz, int dz_stride,
                                                     const float* dy, const float* o,
                                                     const float* z, int z_stride, int N, int T,
                                                     int H, int D, int group) {
  const int lane = threadIdx.x % kWarp;
  const int C = H * D, gates = C / group;
  const size_t item = size_t(warp_row());
  if (item >= size_t(N) * gates) return;
  const size_t n = item / gates;
  const int k = int(item % gates);
  const float gam = attn::sigmoid(z[n * z_stride + k]);
  float s = 0.f;
  for (int c = k * group + lane; c < (k + 1) * group; c += kWarp) {
    const size_t i = n * C + c, hi = head_index(n, c, T, H, D);
    s += dy[i] * o[hi] * gam * (1.f - gam);
    g[hi] = dy[i] * gam;
  }
  s = warp_sum(s);
  if (lane == 0) dz[n * dz_stride + k] = s;
}

// One block per token.
__global__ void rela_norm_forward_kernel(float* y, float* r, float* mu, const float* u,
                                         const float* gamma, const float* w, int C, float eps,
                                         bool center) {
  __shared__ float smem[32];
  const size_t t = blockIdx.x;
  const float* ut = u + t * C;
  float* yt = y + t * C;
  float m = 0.f;
  if (center) {
    for (int c = threadIdx.x; c < C; c += blockDim.x) m += ut[c];
    m = block_sum(m, smem) / C;
  }
  float ss = 0.f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) ss += (ut[c] - m) * (ut[c] - m);
  const float rt = sqrtf(block_sum(ss, smem) / C + eps);
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    const float gate = w ? attn::sigmoid(w[c] * ut[c]) : 1.f;
    yt[c] = gamma[c] * (ut[c] - m) / rt * gate;
  }
  if (threadIdx.x == 0) {
    r[t] = rt;
    mu[t] = m;
  }
}

// du per token (one block each), the formulas of CpuOps::rela_norm_backward:
//   gated/plain: du_c = dy_c gamma_c [sg_c / r + (u_c / r) sg_c (1 - sg_c) w_c] - u_c tot/(C r^3)
//   centred:     du = (h - mean(h) - xh mean(h xh)) / r,  h = gamma dy,  xh = (u - mu) / r
__global__ void rela_norm_backward_du_kernel(float* du, const float* dy, const float* u,
                                             const float* r, const float* mu, const float* gamma,
                                             const float* w, int C, bool center) {
  __shared__ float smem[32];
  const size_t t = blockIdx.x;
  const float* ut = u + t * C;
  const float* dyt = dy + t * C;
  float* dut = du + t * C;
  const float rt = r[t], m = mu[t];
  if (center) {
    float mh = 0.f, mhx = 0.f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
      const float h = gamma[c] * dyt[c];
      mh += h;
      mhx += h * (ut[c] - m) / rt;
    }
    mh = block_sum(mh, smem) / C;
    mhx = block_sum(mhx, smem) / C;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
      dut[c] = (gamma[c] * dyt[c] - mh - (ut[c] - m) / rt * mhx) / rt;
    return;
  }
  float tot = 0.f;
  for (int c = threadIdx.x; c < C; c += blockDim.x)
    tot += dyt[c] * gamma[c] * ut[c] * (w ? attn::sigmoid(w[c] * ut[c]) : 1.f);
  const float k = block_sum(tot, smem) / (C * rt * rt * rt);
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    const float sg = w ? attn::sigmoid(w[c] * ut[c]) : 1.f;
    const float dgate = w ? (ut[c] / rt) * sg * (1.f - sg) * w[c] : 0.f;
    dut[c] = dyt[c] * gamma[c] * (sg / rt + dgate) - ut[c] * k;
  }
}

// partial(chunk, 0|1, c) = sum over the chunk's tokens, in order, of
//   dgamma: dy (u - mu) sg / r;   dw: dy gamma (u / r) sg (1 - sg) u
__global__ void rela_norm_dparam_partial_kernel(float* partial, const float* dy, const float* u,
                                                const float* r, const float* mu, const float* gamma,
                                                const float* w, int N, int C, int chunk_rows) {
  const int c = blockIdx.y * blockDim.x + threadIdx.x;
  const int chunk = blockIdx.x;
  if (c >= C) return;
  const int t1 = min(N, (chunk + 1) * chunk_rows);
  float dg = 0.f, dw = 0.f;
  for (int t = chunk * chunk_rows; t < t1; ++t) {
    const size_t i = size_t(t) * C + c;
    const float uu = u[i], rt = r[t], sg = w ? attn::sigmoid(w[c] * uu) : 1.f;
    dg += dy[i] * (uu - mu[t]) * sg / rt;
    if (w) dw += dy[i] * gamma[c] * (uu / rt) * sg * (1.f - sg) * uu;
  }
  partial[(size_t(chunk) * 2) * C + c] = dg;
  partial[(size_t(chunk) * 2 + 1) * C + c] = dw;
}

int chunks_of(int N, int chunk_rows) {
  return (N + chunk_rows - 1) / chunk_rows;
}

template <class X>
void l2norm_backward_rows(float* dx, const X* xhat, int ld, const float* norm, size_t N, int D) {
  if (N == 0) return;
  check(launch<l2norm_backward_kernel<X>>(dim3(row_blocks(N)), dim3(kRowsPerBlock * kWarp), 0,
                                          stream(), dx, xhat, ld, norm, N, D),
        "l2norm_backward");
}

template <class X>
void row_dot_rows(float* out, const X* a, const float* b, size_t N, int D) {
  if (N == 0) return;
  check(launch<row_dot_kernel<X>>(dim3(row_blocks(N)), dim3(kRowsPerBlock * kWarp), 0, stream(),
                                  out, a, b, N, D),
        "row_dot");
}
}  // namespace

void l2norm_forward(float* x, float* norm, size_t N, int D) {
  if (N == 0) return;
  check(launch<l2norm_forward_kernel>(dim3(row_blocks(N)), dim3(kRowsPerBlock * kWarp), 0, stream(),
                                      x, norm, N, D),
        "l2norm_forward");
}

void l2norm_backward(float* dx, const float* xhat, const float* norm, size_t N, int D) {
  l2norm_backward_rows(dx, xhat, D, norm, N, D);
}

void l2norm_backward(float* dx, const __nv_bfloat16* xhat, int ld, const float* norm, size_t N,
                     int D) {
  l2norm_backward_rows(dx, xhat, ld, norm, N, D);
}

void row_dot(float* out, const float* a, const float* b, size_t N, int D) {
  row_dot_rows(out, a, b, N, D);
}

void row_dot(float* out, const __nv_bfloat16* a, const float* b, size_t N, int D) {
  row_dot_rows(out, a, b, N, D);
}

size_t head_row_sum_scratch(int B, int H, int T, int items_per_block) {
  return size_t(H) * size_t(row_sum_chunks(size_t(B) * size_t(T), items_per_block));
}

void head_row_sum(float* dst, const float* x, const float* w, float scale, int B, int H, int T,
                  double* scratch, int items_per_block) {
  if (H == 0) return;
  const size_t items = size_t(B) * size_t(T);
  const size_t per = row_sum_per(items, items_per_block);
  const int chunks = row_sum_chunks(items, items_per_block);
  if (items > 0)
    check(launch<head_row_sum_partial_kernel>(
              chunk_column_grid(size_t(chunks), size_t(H), 1, "head_row_sum_partial"),
              dim3(kThreads), 0, stream(), scratch, x, w, B, H, T, per, chunks),
          "head_row_sum_partial");
  check(launch<head_row_sum_kernel>(dim3(unsigned(H)), dim3(kThreads), 0, stream(), dst,
                                    static_cast<const double*>(scratch), items > 0 ? chunks : 0,
                                    scale),
        "head_row_sum");
}

void threshold_tau(float* out, const float* beta, float beta_fixed, bool derivative, int T,
                   double kappa, int d) {
  if (T <= 0) return;
  check(launch<threshold_tau_kernel>(dim3(grid_for(size_t(T), kThreads)), dim3(kThreads), 0,
                                     stream(), out, beta, beta_fixed, derivative, T, kappa, d),
        "threshold_tau");
}

void sigmoid_gate_forward(float* y, const float* o, const float* z, int z_stride, int B, int T,
                          int H, int D, int group) {
  const int N = B * T;
  const size_t n = size_t(N) * H * D;
  if (n == 0) return;
  check(launch<sigmoid_gate_forward_kernel>(dim3(grid_for(n, kThreads)), dim3(kThreads), 0,
                                            stream(), y, o, z, z_stride, N, T, H, D, group),
        "sigmoid_gate_forward");
}

void sigmoid_gate_backward(float* g, float* dz, int dz_stride, const float* dy, const float* o,
                           const float* z, int z_stride, int B, int T, int H, int D, int group) {
  const int N = B * T, C = H * D;
  const size_t n = size_t(N) * C;
  if (n == 0) return;
  if (group == 1) {
    check(launch<sigmoid_gate_backward_kernel>(dim3(grid_for(n, kThreads)), dim3(kThreads), 0,
                                               stream(), g, dz, dz_stride, dy, o, z, z_stride, N,
                                               T, H, D),
          "sigmoid_gate_backward");
    return;
  }
  check(launch<sigmoid_gate_backward_grouped_kernel>(
            dim3(row_blocks(size_t(N) * (C / group))), dim3(kRowsPerBlock * kWarp), 0, stream(), g,
            dz, dz_stride, dy, o, z, z_stride, N, T, H, D, group),
        "sigmoid_gate_backward_grouped");
}

void rela_norm_forward(float* y, float* r, float* mu, const float* u, const float* gamma,
                       const float* w, int N, int C, float eps, bool center) {
  if (N == 0) return;
  check(launch<rela_norm_forward_kernel>(dim3(unsigned(N)), dim3(kNormThreads), 0, stream(), y, r,
                                         mu, u, gamma, w, C, eps, center),
        "rela_norm_forward");
}

size_t rela_norm_backward_scratch(int N, int C, int chunk_rows) {
  const int chunks = chunks_of(N, chunk_rows);
  return size_t(chunks) * 2 * size_t(C) + column_sum_scratch(chunks, C);
}

void rela_norm_backward(float* du, float* dgamma, float* dw, const float* dy, const float* u,
                        const float* r, const float* mu, const float* gamma, const float* w, int N,
                        int C, bool center, float* scratch) {
  if (N == 0) return;
  check(launch<rela_norm_backward_du_kernel>(dim3(unsigned(N)), dim3(kNormThreads), 0, stream(), du,
                                             dy, u, r, mu, gamma, w, C, center),
        "rela_norm_backward_du");
  rela_norm_backward_dparams(dgamma, dw, dy, u, r, mu, gamma, w, N, C, scratch);
}

void rela_norm_backward_dparams(float* dgamma, float* dw, const float* dy, const float* u,
                                const float* r, const float* mu, const float* gamma, const float* w,
                                int N, int C, float* scratch, int chunk_rows) {
  if (N == 0) return;
  // Chunks on x (grid.h): N = B*T tokens, 131,072 chunks of 32 at 2^22 (grid.y stops at 65,535).
  const int chunks = chunks_of(N, chunk_rows);
  const int threads = column_threads(size_t(C), kNormThreads);
  const dim3 grid =
      chunk_column_grid(size_t(chunks), size_t(C), threads, "rela_norm_dparam_partial");
  check(launch<rela_norm_dparam_partial_kernel>(grid, dim3(threads), 0, stream(), scratch, dy, u, r,
                                                mu, gamma, w, N, C, chunk_rows),
        "rela_norm_dparam_partial");
  // dgamma += the chunks' partial(chunk, 0, .), dw += partial(chunk, 1, .): column_sum (reduce.cu)
  float* sums = scratch + size_t(chunks) * 2 * C;
  column_sum(dgamma, scratch, chunks, C, 2 * size_t(C), sums);
  if (dw) column_sum(dw, scratch + C, chunks, C, 2 * size_t(C), sums);
}

}  // namespace tda::cuda
