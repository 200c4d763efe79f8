// Per-mechanism attention math, written once for every backend: how a score becomes a weight,
// the derivative of the weight, and the per-row statistic with its update. The streaming
// skeletons (backend/cpu/attention_stream.cpp and the CUDA kernels/attention_{fwd,bwd}.cu) are
// templated on these types and own only tiling, masking, accumulation and tile skipping.
//
// Forward contract of a policy P:
//   P::Row                 running per-row state (e.g. max and sum for softmax)
//   P::param(args)                  the policy's shape argument `p` below, from the AttnArgs: the
//                                   power (rectifiers; ignored by softmax/softplus), alpha - 1
//                                   (entmax)
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
  template <class Args>
  TDA_HD static int param(const Args& a) {
    return a.power;
  }
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
  template <class Args>
  TDA_HD static int param(const Args& a) {
    return a.power;
  }
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
  static constexpr bool kClipsScores = false;  // ThresholdPowPolicy<2>
  template <class Args>
  TDA_HD static int param(const Args& a) {
    return a.power;
  }
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

// ThresholdPolicy at a power fixed when compiling: the CUDA kernels' common p = 1 (rela,
// diff_rela, tra/tda ablations) and p = 2 (tra/tda), with no loop per weight. The same values as
// ipow (1 * r is r; the arithmetic around them may contract differently: diff_rela's lambda
// gradient moved by 1-2 ulp). The tiled kernels pick it by the run's power (attention_tc.cuh).
template <int kPow>
struct ThresholdPowPolicy : ThresholdPolicy {
  static_assert(kPow == 1 || kPow == 2, "other powers take ThresholdPolicy's loop");
  // max(r, 0) in place of the test r > 0, the same values (r <= 0 and NaN give 0), one FMNMX
  // where the test and its select were two instructions: the weight and, at p = 2, bwd's a and f
  // from one m. (At p = 1 bwd's a keeps the test: fmaxf's zero may be -0, and a is summed.)
  TDA_HD static float weight(const Row&, float s, float tau, int) {
    const float m = fmaxf(s - tau, 0.f);
    return kPow == 2 ? m * m : m;
  }
  TDA_HD static void bwd(float s, float, float tau, int, float* a, float* f) {
    const float r = s - tau;
    const float m = fmaxf(r, 0.f);
    *a = kPow == 2 ? m * m : (r > 0.f ? r : 0.f);
    *f = kPow == 2 ? slope_clipped(m) : (r > 0.f ? 1.f : 0.f);
  }
  // p = 2 in m = max(r, 0), which the dk/dv kernel keeps in place of r between its weight pass
  // and its gradient pass (kClipsScores): a = m^2, f = 2 m.
  static constexpr bool kClipsScores = kPow == 2;
  TDA_HD static float weight_clipped(float m) { return m * m; }
  TDA_HD static float slope_clipped(float m) { return 2.f * m; }
};

// alpha-entmax (Peters et al. 2019; the entmax package's entmax_bisect convention), 1 < alpha <= 2,
// am1 = alpha - 1 (1.5-entmax: am1 = 1/2). On one row, in the frame u = am1 z of the scaled scores:
//   p_j = max(u_j - tau, 0)^(1/am1) / norm,  tau such that sum_j p_j = 1 (norm = 1 when exact)
//   backward: g_j = p_j^(2 - alpha) (1.5: sqrt(p_j));  dz_j = g_j (dp_j - c),  c = sum g dp / sum g
// alpha = 1.5 keeps its closed forms (r^2, sqrt): the same bits as before alpha became an option.
struct Entmax {
  // r^(1/am1) for r > 0
  TDA_HD static float pow_inv(float r, float am1) {
    return am1 == 0.5f ? r * r : powf(r, 1.f / am1);
  }
  // p^(2 - alpha) = p^(1 - am1), the backward's weight of a support entry (p > 0)
  TDA_HD static float grad_weight(float p, float am1) {
    return am1 == 0.5f ? sqrtf(p) : powf(p, 1.f - am1);
  }
  TDA_HD static float prob(float z, float tau, float norm, float am1) {
    const float r = am1 * z - tau;
    return r > 0.f ? pow_inv(r, am1) / norm : 0.f;
  }
  // The bisection bracket of a row of n scores whose largest u is m (entmax_bisect):
  //   lo = m - 1 (p_max = 1, f >= 0), hi = m - (1/n)^am1 (every p <= 1/n, f <= 0).
  TDA_HD static float bracket_hi(float m, int n, float am1) {
    return am1 == 0.5f ? m - 1.f / sqrtf(float(n)) : m - powf(1.f / float(n), am1);
  }
  // Bisection (entmax package's EntmaxBisectFunction): f(tau) = sum [u - tau]_+^(1/am1) - 1 on
  // [lo, hi]; the result is the last midpoint; *norm = f(tau) + 1 so that p / norm sums to 1
  // (ensure_sum_one).
  TDA_HD static float bisect(const float* z, int n, int iters, float am1, float* norm) {
    float m = -INFINITY;
    for (int j = 0; j < n; ++j) m = fmaxf(m, am1 * z[j]);
    float lo = m - 1.f, hi = bracket_hi(m, n, am1);
    auto f = [&](float tau) {
      float acc = 0.f;
      for (int j = 0; j < n; ++j) {
        const float r = am1 * z[j] - tau;
        if (r > 0.f) acc += pow_inv(r, am1);
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

// alpha-entmax in the tiled tensor-core kernels, once a pre-pass over the keys has found each
// row's tau and norm (kernels/attention_entmax.cu; stats (tau, norm) as Entmax above). With the
// threshold in the score frame, t_i = tau_i / am1 (the kernels' per-row "tau", read from the
// stats: kStatTau) and the row state norm_i:
//   p_ij = (am1 max(s - t_i, 0))^(1/am1) / norm_i  (weight() leaves out 1/norm_i: the forward
//   divides; 1.5: (s - t)^2 / 4)
//   backward: a = p_ij, f = p_ij^(2 - alpha), ds = f (e - D_i) with D_i = c_i (Entmax above)
// param(a) is am1, the kernels' per-policy argument (the other policies take the power p).
struct EntmaxPolicy {
  static constexpr bool kNormalized = true, kOnlineMax = false, kSparse = true, kStatTau = true;
  struct Row {
    float norm = 1.f;
  };
  template <class Args>
  TDA_HD static float param(const Args& a) {
    return a.entmax_alpha - 1.f;
  }
  TDA_HD static float rebase(Row&, float) { return 1.f; }
  TDA_HD static float weight(const Row&, float s, float t, float am1) {
    const float r = s - t;
    return r > 0.f ? (am1 == 0.5f ? 0.25f * r * r : Entmax::pow_inv(am1 * r, am1)) : 0.f;
  }
  TDA_HD static void add(Row&, float) {}
  TDA_HD static float norm(const Row& r) { return r.norm; }
  TDA_HD static float stat(const Row& r) { return r.norm; }
  TDA_HD static void merge(Row&, const Row&) {}  // norm comes from the pre-pass, not the keys
  TDA_HD static void bwd(float s, float norm, float t, float am1, float* a, float* f) {
    if (s - t > 0.f) {
      *a = weight(Row{}, s, t, am1) / norm;
      *f = Entmax::grad_weight(*a, am1);
    } else {
      *a = 0.f;
      *f = 0.f;
    }
  }
};

}  // namespace attn
}  // namespace tda
