// Rotary position embedding (GPT-NeoX pairing: channel c rotates with c + D/2).
// For position p and pair index i < D/2 with angle p * inv_freq[i]:
//   out[i]       = x[i] cos - x[i+D/2] sin
//   out[i+D/2]   = x[i] sin + x[i+D/2] cos
// Backward is the transpose rotation (angle -> -angle), of dout's rows scaled by a row scale when
// one is given.
#include "backend/cpu/cpu_ops.h"

namespace tda {

namespace {
template <bool kTranspose>
void rotate(float* dst_bhtd, const float* src_rows, float* dst_rows, const float* src_bhtd, int row,
            int col0, const float* cos, const float* sin, int B, int T, int H, int D, int pos0,
            const float* scale = nullptr, int scale_h_stride = 0) {
  const int half = D / 2;
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      const float* c = cos + size_t(pos0 + t) * half;
      const float* s = sin + size_t(pos0 + t) * half;
      for (int h = 0; h < H; ++h) {
        size_t rowoff = (size_t(b) * T + t) * row + col0 + size_t(h) * D;
        size_t headoff = ((size_t(b) * H + h) * T + t) * D;
        if (!kTranspose) {
          const float* x = src_rows + rowoff;
          float* o = dst_bhtd + headoff;
          for (int i = 0; i < half; ++i) {
            float x1 = x[i], x2 = x[i + half];
            o[i] = x1 * c[i] - x2 * s[i];
            o[i + half] = x1 * s[i] + x2 * c[i];
          }
        } else {
          const float* g = src_bhtd + headoff;
          float* dx = dst_rows + rowoff;
          const float f = scale ? scale[size_t(h) * scale_h_stride + t] : 1.f;
          for (int i = 0; i < half; ++i) {
            // one fp32 product per element (x * 1 is exact without a scale)
            float g1 = f * g[i], g2 = f * g[i + half];
            dx[i] = g1 * c[i] + g2 * s[i];
            dx[i + half] = -g1 * s[i] + g2 * c[i];
          }
        }
      }
    }
}
}  // namespace

void CpuOps::rope_forward(float* out, const float* x, int row, int col0, const float* cos,
                          const float* sin, int B, int T, int H, int D, int pos0) {
  rotate<false>(out, x, nullptr, nullptr, row, col0, cos, sin, B, T, H, D, pos0);
}

void CpuOps::rope_backward(float* dx, const float* dout, int row, int col0, const float* cos,
                           const float* sin, int B, int T, int H, int D, int pos0,
                           const float* row_scale, int scale_h_stride) {
  rotate<true>(nullptr, nullptr, dx, dout, row, col0, cos, sin, B, T, H, D, pos0, row_scale,
               scale_h_stride);
}

void CpuOps::split_heads(float* out, const float* x, int row, int col0, int B, int T, int H,
                         int D) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h)
        for (int d = 0; d < D; ++d)
          out[((size_t(b) * H + h) * T + t) * D + d] =
              x[(size_t(b) * T + t) * row + col0 + h * D + d];
}

void CpuOps::merge_heads(float* x, const float* in, int row, int col0, int B, int T, int H, int D) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h)
        for (int d = 0; d < D; ++d)
          x[(size_t(b) * T + t) * row + col0 + h * D + d] =
              in[((size_t(b) * H + h) * T + t) * D + d];
}

}  // namespace tda
