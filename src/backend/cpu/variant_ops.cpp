// Pre/post pieces of the attention variants on the CPU (ops.h documents each; the formulas are
// repeated next to the loops). Per-token loops only; the one reduction over tokens (ReLA's
// dgamma, dw) runs serially per channel in double, so its result does not depend on threads.
#include <algorithm>
#include <cmath>

#include "attention/policies.h"
#include "backend/cpu/cpu_ops.h"

namespace tda {

using attn::sigmoid;

// x~ = x / max(|x|, 1e-12);  norm = |x|
void CpuOps::l2norm_forward(float* x, float* norm, size_t N, int D) {
#pragma omp parallel for schedule(static)
  for (size_t n = 0; n < N; ++n) {
    float* r = x + n * D;
    float ss = 0.f;
    for (int d = 0; d < D; ++d) ss += r[d] * r[d];
    const float nrm = std::sqrt(ss);
    const float inv = 1.f / std::max(nrm, 1e-12f);
    for (int d = 0; d < D; ++d) r[d] *= inv;
    norm[n] = nrm;
  }
}

// dx = (dx~ - x~ (x~.dx~)) / |x|: the Jacobian of x / |x| projects out the radial direction
void CpuOps::l2norm_backward(float* dx, const float* xhat, const float* norm, size_t N, int D) {
#pragma omp parallel for schedule(static)
  for (size_t n = 0; n < N; ++n) {
    float* g = dx + n * D;
    const float* xh = xhat + n * D;
    if (norm[n] > 1e-12f) {
      float p = 0.f;
      for (int d = 0; d < D; ++d) p += xh[d] * g[d];
      const float inv = 1.f / norm[n];
      for (int d = 0; d < D; ++d) g[d] = (g[d] - xh[d] * p) * inv;
    } else {
      for (int d = 0; d < D; ++d) g[d] *= 1e12f;  // the clamp is active: x~ = x / 1e-12 is linear
    }
  }
}

void CpuOps::row_dot(float* out, const float* a, const float* b, size_t N, int D) {
#pragma omp parallel for schedule(static)
  for (size_t n = 0; n < N; ++n) {
    float s = 0.f;
    for (int d = 0; d < D; ++d) s += a[n * D + d] * b[n * D + d];
    out[n] = s;
  }
}

// dst[h] += scale sum_{b,t} w[t] x[(b H + h) T + t]: one head per iteration, serial in double
void CpuOps::head_row_sum(float* dst, const float* x, const float* w, float scale, int B, int H,
                          int T) {
#pragma omp parallel for schedule(static)
  for (int h = 0; h < H; ++h) {
    double s = 0;
    for (int b = 0; b < B; ++b) {
      const float* r = x + (size_t(b) * H + h) * T;
      for (int t = 0; t < T; ++t) s += (w ? double(w[t]) : 1.0) * r[t];
    }
    dst[h] += float(double(scale) * s);
  }
}

// out_i = g(beta) c_i
void CpuOps::threshold_tau(float* out, const float* beta, float beta_fixed, bool derivative, int T,
                           double kappa, int d) {
  const float b = beta ? *beta : beta_fixed;
  const float g = derivative ? (b > 0.f ? 1.f : 0.f) : std::max(b, 0.f);
  for (int i = 0; i < T; ++i) out[i] = g * attn::threshold_c(i, kappa, d);
}

// Element c = h D + d of token n = b T + t in head layout: (b, h, t, d).
static size_t head_index(int n, int c, int T, int H, int D) {
  const int b = n / T, t = n % T, h = c / D, d = c % D;
  return ((size_t(b) * H + h) * T + t) * D + d;
}

// y (rows) = o (heads) sigmoid(z)
void CpuOps::sigmoid_gate_forward(float* y, const float* o, const float* z, int z_stride, int B,
                                  int T, int H, int D, int group) {
  const int N = B * T, C = H * D;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      y[size_t(n) * C + c] =
          o[head_index(n, c, T, H, D)] * sigmoid(z[size_t(n) * z_stride + c / group]);
}

// g (heads) = dy gam;  dz = sum over the gate's channels of dy o gam (1 - gam)
void CpuOps::sigmoid_gate_backward(float* g, float* dz, int dz_stride, const float* dy,
                                   const float* o, const float* z, int z_stride, int B, int T,
                                   int H, int D, int group) {
  const int N = B * T, C = H * D;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    float* dzn = dz + size_t(n) * dz_stride;
    for (int k = 0; k < C / group; ++k) dzn[k] = 0.f;
    for (int c = 0; c < C; ++c) {
      const size_t idx = size_t(n) * C + c, hi = head_index(n, c, T, H, D);
      const float gam = sigmoid(z[size_t(n) * z_stride + c / group]);
      dzn[c / group] += dy[idx] * o[hi] * gam * (1.f - gam);
      g[hi] = dy[idx] * gam;
    }
  }
}

// r = sqrt(mean((u - mu)^2) + eps);  y = gamma (u - mu) / r * (w ? sigmoid(w u) : 1)
void CpuOps::rela_norm_forward(float* y, float* r, float* mu, const float* u, const float* gamma,
                               const float* w, int N, int C, float eps, bool center) {
#pragma omp parallel for schedule(static)
  for (int t = 0; t < N; ++t) {
    const float* ut = u + size_t(t) * C;
    float* yt = y + size_t(t) * C;
    float m = 0.f, ss = 0.f;
    if (center) {
      for (int c = 0; c < C; ++c) m += ut[c];
      m /= C;
    }
    for (int c = 0; c < C; ++c) ss += (ut[c] - m) * (ut[c] - m);
    const float rt = std::sqrt(ss / C + eps);
    for (int c = 0; c < C; ++c) {
      const float gate = w ? sigmoid(w[c] * ut[c]) : 1.f;
      yt[c] = gamma[c] * (ut[c] - m) / rt * gate;
    }
    r[t] = rt;
    mu[t] = m;
  }
}

// Gated / plain RMS (sg = sigmoid(w u) or 1, tot = sum_e dy_e gamma_e u_e sg_e):
//   du_c = dy_c gamma_c [sg_c / r + (u_c / r) sg_c (1 - sg_c) w_c] - u_c tot / (C r^3)
// Centred (xh = (u - mu) / r, h = gamma dy):  du = (h - mean(h) - xh mean(h xh)) / r
//   dgamma_c += sum_t dy (u - mu) sg / r;  dw_c += sum_t dy gamma (u / r) sg (1 - sg) u
void CpuOps::rela_norm_backward(float* du, float* dgamma, float* dw, const float* dy,
                                const float* u, const float* r, const float* mu, const float* gamma,
                                const float* w, int N, int C, bool center) {
#pragma omp parallel for schedule(static)
  for (int t = 0; t < N; ++t) {
    const float* ut = u + size_t(t) * C;
    const float* dyt = dy + size_t(t) * C;
    float* dut = du + size_t(t) * C;
    const float rt = r[t], m = mu[t];
    if (center) {
      float mh = 0.f, mhx = 0.f;
      for (int c = 0; c < C; ++c) {
        const float h = gamma[c] * dyt[c];
        mh += h;
        mhx += h * (ut[c] - m) / rt;
      }
      mh /= C;
      mhx /= C;
      for (int c = 0; c < C; ++c) dut[c] = (gamma[c] * dyt[c] - mh - (ut[c] - m) / rt * mhx) / rt;
      continue;
    }
    float tot = 0.f;
    for (int c = 0; c < C; ++c)
      tot += dyt[c] * gamma[c] * ut[c] * (w ? sigmoid(w[c] * ut[c]) : 1.f);
    const float k = tot / (C * rt * rt * rt);
    for (int c = 0; c < C; ++c) {
      const float sg = w ? sigmoid(w[c] * ut[c]) : 1.f;
      const float dgate = w ? (ut[c] / rt) * sg * (1.f - sg) * w[c] : 0.f;
      dut[c] = dyt[c] * gamma[c] * (sg / rt + dgate) - ut[c] * k;
    }
  }
#pragma omp parallel for schedule(static)
  for (int c = 0; c < C; ++c) {
    double dg = 0, dwc = 0;
    for (int t = 0; t < N; ++t) {
      const size_t idx = size_t(t) * C + c;
      const float uu = u[idx], rt = r[t], sg = w ? sigmoid(w[c] * uu) : 1.f;
      dg += double(dy[idx]) * (uu - mu[t]) * sg / rt;
      if (w) dwc += double(dy[idx]) * gamma[c] * (uu / rt) * sg * (1.f - sg) * uu;
    }
    dgamma[c] += float(dg);
    if (w) dw[c] += float(dwc);
  }
}

}  // namespace tda
