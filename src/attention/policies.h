// Per-mechanism attention math, written once for every backend: how a score becomes a weight,
// the derivative of the weight, and the per-row statistic with its update. The streaming
// skeletons (backend/cpu/attention_stream.cpp and the CUDA kernels/attention_{fwd,bwd}.cu) are
// templated on these types and own only tiling, masking, accumulation and tile skipping.
//
// Forward contract of a policy P:
//   P::Row                 running per-row state (e.g. max and sum for softmax)
//   P::weight(row, s, tau, p)       un-normalised weight w(s) of a score given the row state
//   P::rebase(row, tile_max)        (online-max policies) new max; returns the factor that
//                                   rescales what was accumulated so far
//   P::add(row, w)                  fold one weight into the row normaliser
//   P::norm(row)                    Z_i (1 for un-normalised policies)
//   P::stat(row)                    the one float saved per row for the backward
//   P::merge(row, other)            fold in the state of the same row over other keys (the CUDA
//                                   kernels split a row's keys over the 4 lanes of a quad)
// Backward contract:
//   P::bwd(s, stat, tau, p, &a, &f) recompute a_ij and f_ij with ds_ij = f_ij (da_ij - D_i)
//                                   (D_i = g_i.o_i for normalised policies, 0 otherwise).
#pragma once
#include <cmath>

#ifndef __CUDACC__
#define TDA_HD
#else
#define TDA_HD __host__ __device__
#endif

namespace tda {
namespace attn {

// The TRA/TDA threshold scale of row i (0-indexed), tau_i = max(beta, 0) c_i (in double, then
// rounded): c_i = sqrt(2 max(0, log((i+1)/kappa)) / d). max(0, .) guards kappa > 1 (the released
// code hard-wires kappa = 1).
TDA_HD inline float threshold_c(int i, double kappa, int d) {
  const double l = fmax(0.0, log(double(i + 1) / kappa));
  return float(sqrt(2.0 * l / d));
}

TDA_HD inline float sigmoid(float x) {
  return 1.f / (1.f + expf(-x));
}

// r^p for a small positive integer p (the paper uses p in {1, 2, 3, 5}).
TDA_HD inline float ipow(float r, int p) {
  float y = 1.f;
  for (int e = 0; e < p; ++e) y *= r;
  return y;
}

// Small parameters of the variants, computed on the device (Ops::clamp_affine, diff_lambda,
// position_scales: no host read in a micro-step); the CPU backend runs the same functions.
// v = a x + b;  clamp(v, lo, hi) (NaN passes through, as std::min/std::max pass it); *inside =
// [lo <= v <= hi].
TDA_HD inline float clamp_affine(float x, float a, float b, float lo, float hi, bool* inside) {
  const float v = a * x + b;
  *inside = v >= lo && v <= hi;
  return v < lo ? lo : v > hi ? hi : v;
}
// e_t = exp(lq . lk) over d components in order.
TDA_HD inline float exp_dot(const float* lq, const float* lk, int d) {
  float s = 0.f;
  for (int i = 0; i < d; ++i) s += lq[i] * lk[i];
  return expf(s);
}
// s (log(i+1) / div) + b: ssmax's f_hi = s_h log n_i + b_h, lssa's log(n_i) / log(base).
TDA_HD inline float position_scale(int i, float s, float b, float div) {
  return s * (logf(float(i + 1)) / div) + b;
}

// Softmax (softmax, gated_softmax, ssmax, dex, each view of diff_softmax):
//   m_i = running max;  w = exp(s - m_i);  l_i = sum w;  a = w / l_i;  stat = LSE = m + log l
//   backward: a = exp(s - LSE), ds = a (da - D)  ->  f = a
struct SoftmaxPolicy {
  static constexpr bool kNormalized = true, kOnlineMax = true, kSparse = false, kStatTau = false;
  struct Row {
    float m = -INFINITY, l = 0.f;
  };
  TDA_HD static float rebase(Row& r, float tile_max) {
    const float m_new = r.m > tile_max ? r.m : tile_max;
    const float corr = expf(r.m - m_new);  // exp(-inf) = 0 on the first tile
    r.l *= corr;
    r.m = m_new;
    return corr;
  }
  TDA_HD static float weight(const Row& r, float s, float, int) { return expf(s - r.m); }
  TDA_HD static void add(Row& r, float w) { r.l += w; }
  TDA_HD static float norm(const Row& r) { return r.l; }  // l_i >= 1: every row holds j = i
  TDA_HD static float stat(const Row& r) { return r.m + logf(r.l); }
  // (m, l) + (m', l') = (M, l e^(m-M) + l' e^(m'-M)), M = max(m, m'); an empty side (m = -inf)
  // contributes 0.
  TDA_HD static void merge(Row& r, const Row& o) {
    const float M = r.m > o.m ? r.m : o.m;
    if (M == -INFINITY) return;
    r.l = (r.m == -INFINITY ? 0.f : r.l * expf(r.m - M)) +
          (o.m == -INFINITY ? 0.f : o.l * expf(o.m - M));
    r.m = M;
  }
  TDA_HD static void bwd(float s, float lse, float, int, float* a, float* f) {
    *a = expf(s - lse);
    *f = *a;
  }
};

// Softplus, l1-normalised (lssa; the length scale c_i is folded into q by the variant):
//   w = softplus(s) = max(s,0) + log1p(exp(-|s|));  F_i = sum w;  a = w / F_i;  stat = F_i
//   backward: dw/ds = sigmoid(s)  ->  ds = sigmoid(s)/F (da - D),  f = sigmoid(s)/F
struct SoftplusPolicy {
  static constexpr bool kNormalized = true, kOnlineMax = false, kSparse = false, kStatTau = false;
  struct Row {
    float F = 0.f;
  };
  TDA_HD static float softplus(float s) { return fmaxf(s, 0.f) + log1pf(expf(-fabsf(s))); }
  TDA_HD static float rebase(Row&, float) { return 1.f; }
  TDA_HD static float weight(const Row&, float s, float, int) { return softplus(s); }
  TDA_HD static void add(Row& r, float w) { r.F += w; }
  TDA_HD static float norm(const Row& r) { return r.F; }  // F_i >= softplus(s_ii) > 0
  TDA_HD static float stat(const Row& r) { return r.F; }
  TDA_HD static void merge(Row& r, const Row& o) { r.F += o.F; }
  TDA_HD static void bwd(float s, float F, float, int, float* a, float* f) {
    *a = softplus(s) / F;
    *f = sigmoid(s) / F;
  }
};

// Rectifier against a row threshold (tra, tda: tau_i = beta c_i; rela, diff_rela: tau = 0, p = 1):
//   r = s - tau_i;  a = max(r, 0)^p;  da/ds = p r^(p-1) for r > 0, else 0 (p = 1: 1[r > 0])
// No row statistic: the weight is final as soon as the score is known.
struct ThresholdPolicy {
  static constexpr bool kNormalized = false, kOnlineMax = false, kSparse = true, kStatTau = false;
  struct Row {};
  TDA_HD static float rebase(Row&, float) { return 1.f; }
  TDA_HD static float weight(const Row&, float s, float tau, int p) {
    const float r = s - tau;
    return r > 0.f ? ipow(r, p) : 0.f;
  }
  TDA_HD static void add(Row&, float) {}
  TDA_HD static float norm(const Row&) { return 1.f; }
  TDA_HD static float stat(const Row&) { return 0.f; }
  TDA_HD static void merge(Row&, const Row&) {}
  TDA_HD static void bwd(float s, float, float tau, int p, float* a, float* f) {
    const float r = s - tau;
    if (r > 0.f) {
      *a = ipow(r, p);
      *f = float(p) * ipow(r, p - 1);
    } else {
      *a = 0.f;
      *f = 0.f;
    }
  }
};

// 1.5-entmax in the tiled tensor-core kernels, once a pre-pass over the keys has found each
// row's tau and norm (kernels/attention_entmax.cu; stats (tau, norm) as Entmax15 below). With
// the threshold in the score frame, t_i = 2 tau_i (the kernels' per-row "tau", read from the
// stats: kStatTau) and the row state norm_i:
//   p_ij = max(s - t_i, 0)^2 / 4 / norm_i  (weight() leaves out 1/norm_i: the forward divides)
//   backward: a = p_ij, f = sqrt(p_ij), ds = f (e - D_i) with D_i = c_i (Entmax15 below)
struct Entmax15Policy {
  static constexpr bool kNormalized = true, kOnlineMax = false, kSparse = true, kStatTau = true;
  struct Row {
    float norm = 1.f;
  };
  TDA_HD static float rebase(Row&, float) { return 1.f; }
  TDA_HD static float weight(const Row&, float s, float t, int) {
    const float r = s - t;
    return r > 0.f ? 0.25f * r * r : 0.f;
  }
  TDA_HD static void add(Row&, float) {}
  TDA_HD static float norm(const Row& r) { return r.norm; }
  TDA_HD static float stat(const Row& r) { return r.norm; }
  TDA_HD static void merge(Row&, const Row&) {}  // norm comes from the pre-pass, not the keys
  TDA_HD static void bwd(float s, float norm, float t, int, float* a, float* f) {
    const float r = s - t;
    if (r > 0.f) {
      *a = 0.25f * r * r / norm;
      *f = sqrtf(*a);
    } else {
      *a = 0.f;
      *f = 0.f;
    }
  }
};

// 1.5-entmax (Peters et al. 2019) on one row z_0..z_{n-1} (z = scaled score):
//   p_j = max(z_j/2 - tau, 0)^2 / norm,   tau such that sum_j p_j = 1 (norm = 1 when exact)
//   backward: g_j = sqrt(p_j);  dz_j = g_j (dp_j - c),  c = sum g dp / sum g
struct Entmax15 {
  TDA_HD static float prob(float z, float tau, float norm) {
    const float r = 0.5f * z - tau;
    return r > 0.f ? r * r / norm : 0.f;
  }
  // Bisection (entmax package's EntmaxBisectFunction, alpha = 1.5): u = z/2, m = max u,
  //   bracket [m - 1, m - 1/sqrt(n)], f(tau) = sum [u - tau]_+^2 - 1; the result is the last
  //   midpoint; *norm = sum_j [u_j - tau]_+^2 so that p / norm sums to 1 (ensure_sum_one).
  TDA_HD static float bisect(const float* z, int n, int iters, float* norm) {
    float m = -INFINITY;
    for (int j = 0; j < n; ++j) m = fmaxf(m, 0.5f * z[j]);
    float lo = m - 1.f, hi = m - 1.f / sqrtf(float(n));
    auto f = [&](float tau) {
      float acc = 0.f;
      for (int j = 0; j < n; ++j) {
        const float r = 0.5f * z[j] - tau;
        if (r > 0.f) acc += r * r;
      }
      return acc - 1.f;
    };
    const float f_lo = f(lo);
    float mid = lo;
    for (int it = 0; it < iters; ++it) {
      mid = 0.5f * (lo + hi);
      const float fm = f(mid);
      if (fm * f_lo >= 0.f)
        lo = mid;
      else
        hi = mid;
    }
    *norm = f(mid) + 1.f;
    return mid;
  }
};

}  // namespace attn
}  // namespace tda
