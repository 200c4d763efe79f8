// The variants' small parameters (ops.h: clamp_affine, diff_lambda, position_scales), with the
// math of attention/policies.h that the CUDA kernels (kernels/variant_scalars.cu) run too.
#include "attention/policies.h"
#include "backend/cpu/cpu_ops.h"

namespace tda {

void CpuOps::clamp_affine(float* out, const float* x, float a, float b, float lo, float hi) {
  bool inside = false;
  out[0] = attn::clamp_affine(*x, a, b, lo, hi, &inside);
  out[1] = inside ? 1.f : 0.f;
}

void CpuOps::diff_lambda(float* out, const float* lq1, const float* lk1, const float* lq2,
                         const float* lk2, int d, float init) {
  const float e1 = attn::exp_dot(lq1, lk1, d), e2 = attn::exp_dot(lq2, lk2, d);
  out[0] = e1;
  out[1] = e2;
  out[2] = e1 - e2 + init;
}

// The axpby of each vector: y = c x + 1 y, c = dl e1 or -dl e2.
void CpuOps::diff_lambda_backward(float* dlq1, float* dlk1, float* dlq2, float* dlk2,
                                  const float* lq1, const float* lk1, const float* lq2,
                                  const float* lk2, const float* e, const float* dl_sum, int d) {
  const float c1 = *dl_sum * e[0], c2 = -*dl_sum * e[1];
  for (int i = 0; i < d; ++i) {
    dlq1[i] = c1 * lk1[i] + 1.f * dlq1[i];
    dlk1[i] = c1 * lq1[i] + 1.f * dlk1[i];
    dlq2[i] = c2 * lk2[i] + 1.f * dlq2[i];
    dlk2[i] = c2 * lq2[i] + 1.f * dlk2[i];
  }
}

void CpuOps::position_scales(float* f, const float* s, const float* b, float div, int H, int T) {
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < T; ++i)
      f[size_t(h) * T + i] = attn::position_scale(i, s ? s[h] : 1.f, b ? b[h] : 0.f, div);
}

}  // namespace tda
