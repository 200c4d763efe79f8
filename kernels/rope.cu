// Rotary position embedding (GPT-NeoX pairing: channel i rotates with i + D/2) and the plain
// head split/merge, as src/backend/cpu/rope.cpp. Position p = pos0 + t, pair i < D/2:
//   forward:   out[i] = x[i] cos - x[i+D/2] sin;   out[i+D/2] = x[i] sin + x[i+D/2] cos
//   backward:  dx[i]  = g[i] cos + g[i+D/2] sin;   dx[i+D/2]  = -g[i] sin + g[i+D/2] cos
//              (g = f_ht dout with a row scale, one fp32 product per element)
// x/dx are the head slice [col0 + h D, col0 + (h+1) D) of row b*T+t of a (B*T, row) matrix;
// out/g are (B, H, T, D). One thread per (b, t, h, i) pair (per element for split/merge).
#include "backend/cuda/common.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/kernel_helpers.cuh"

namespace tda::cuda {

namespace {
constexpr int kThreads = 256;

template <bool kTranspose>
__global__ void rope_kernel(float* heads, float* rows, int row, int col0, const float* cos,
                            const float* sin, int B, int T, int H, int D, int pos0,
                            const float* scale, int scale_h_stride) {
  const int half = D / 2;
  const size_t total = size_t(B) * T * H * half;
  TDA_GRID_STRIDE(idx, total) {
    const int i = int(idx % half);
    size_t r = idx / half;
    const int h = int(r % H);
    r /= H;
    const int t = int(r % T);
    const int b = int(r / T);
    const float c = cos[size_t(pos0 + t) * half + i];
    const float s = sin[size_t(pos0 + t) * half + i];
    float* x = rows + (size_t(b) * T + t) * row + col0 + size_t(h) * D;
    float* o = heads + ((size_t(b) * H + h) * T + t) * D;
    if (!kTranspose) {
      const float x1 = x[i], x2 = x[i + half];
      o[i] = x1 * c - x2 * s;
      o[i + half] = x1 * s + x2 * c;
    } else {
      const float f = scale ? scale[size_t(h) * scale_h_stride + t] : 1.f;
      const float g1 = f * o[i], g2 = f * o[i + half];  // x * 1 is exact without a scale
      x[i] = g1 * c + g2 * s;
      x[i + half] = -g1 * s + g2 * c;
    }
  }
}

// kMerge: rows(b*T+t, col0 + h D + d) = heads(b,h,t,d); else heads = rows.
template <bool kMerge>
__global__ void heads_kernel(float* heads, float* rows, int row, int col0, int B, int T, int H,
                             int D) {
  const size_t total = size_t(B) * H * T * D;
  TDA_GRID_STRIDE(idx, total) {
    const int d = int(idx % D);
    size_t r = idx / D;
    const int t = int(r % T);
    r /= T;
    const int h = int(r % H);
    const int b = int(r / H);
    float* x = rows + (size_t(b) * T + t) * row + col0 + size_t(h) * D + d;
    if (kMerge)
      *x = heads[idx];
    else
      heads[idx] = *x;
  }
}
}  // namespace

void rope_forward(float* out, const float* x, int row, int col0, const float* cos, const float* sin,
                  int B, int T, int H, int D, int pos0) {
  const size_t n = size_t(B) * T * H * (D / 2);
  if (n == 0) return;
  check(launch<rope_kernel<false>>(dim3(grid_for(n, kThreads)), dim3(kThreads), 0, stream(), out,
                                   const_cast<float*>(x), row, col0, cos, sin, B, T, H, D, pos0,
                                   static_cast<const float*>(nullptr), 0),
        "rope_forward");
}

void rope_backward(float* dx, const float* dout, int row, int col0, const float* cos,
                   const float* sin, int B, int T, int H, int D, int pos0, const float* row_scale,
                   int scale_h_stride) {
  const size_t n = size_t(B) * T * H * (D / 2);
  if (n == 0) return;
  check(launch<rope_kernel<true>>(dim3(grid_for(n, kThreads)), dim3(kThreads), 0, stream(),
                                  const_cast<float*>(dout), dx, row, col0, cos, sin, B, T, H, D,
                                  pos0, row_scale, scale_h_stride),
        "rope_backward");
}

void split_heads(float* out, const float* x, int row, int col0, int B, int T, int H, int D) {
  const size_t n = size_t(B) * H * T * D;
  if (n == 0) return;
  check(launch<heads_kernel<false>>(dim3(grid_for(n, kThreads)), dim3(kThreads), 0, stream(), out,
                                    const_cast<float*>(x), row, col0, B, T, H, D),
        "split_heads");
}

void merge_heads(float* x, const float* in, int row, int col0, int B, int T, int H, int D) {
  const size_t n = size_t(B) * H * T * D;
  if (n == 0) return;
  check(launch<heads_kernel<true>>(dim3(grid_for(n, kThreads)), dim3(kThreads), 0, stream(),
                                   const_cast<float*>(in), x, row, col0, B, T, H, D),
        "merge_heads");
}

}  // namespace tda::cuda
