// Attention maps rebuilt from a kernel's arguments, and the probe that observes the kernels
// (diagnostics.h). Statistics: diagnostics_stats.cpp; the report: diagnostics_run.cpp.
#include "eval/diagnostics.h"

#include <algorithm>
#include <cmath>

#include "attention/policies.h"
#include "backend/device_array.h"
#include "core/error.h"

namespace tda {

namespace {

float dot(const float* a, const float* b, int D) {
  float s = 0.f;
  for (int d = 0; d < D; ++d) s += a[d] * b[d];
  return s;
}

// Exact 1.5-entmax of one row z_0..z_{n-1} (Peters et al. 2019, sort-based), in double:
//   u = z/2 sorted descending; for k = 1..n: M_k = mean(u_1..k), Q_k = mean(u_1..k ^2),
//   delta_k = (1 - k (Q_k - M_k^2)) / k, tau_k = M_k - sqrt(max(delta_k, 0));
//   k* = last k with tau_k <= u_k;  p_j = max(u_j - tau_k*, 0)^2
void entmax15_row(const float* z, int n, float* p) {
  std::vector<double> u(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) u[size_t(j)] = 0.5 * double(z[j]);
  std::sort(u.begin(), u.end(), [](double a, double b) { return a > b; });
  double sum = 0, sum2 = 0, tau_star = u[0] - 1.0;
  for (int k = 1; k <= n; ++k) {
    const double x = u[size_t(k - 1)];
    sum += x;
    sum2 += x * x;
    const double M = sum / k, Q = sum2 / k;
    const double delta = (1.0 - k * (Q - M * M)) / k;
    const double tau = M - std::sqrt(std::max(delta, 0.0));
    if (tau <= x) tau_star = tau;
  }
  for (int j = 0; j < n; ++j) {
    const double r = 0.5 * double(z[j]) - tau_star;
    p[j] = r > 0 ? float(r * r) : 0.f;
  }
}

// One view's map of head h: scores s_ij = scale q_i.k_j (j <= i) turned into weights. `tail`
// (optional) counts |s_ij| > k tail->sigma. Rows are independent: one thread per row.
void view_map(const AttnArgs& a, AttnMath math, const float* q, const float* k, float* A,
              TailCount* tail) {
  const int T = a.T, D = a.Dqk;
  const double sig = tail ? tail->sigma : 0.0, mu = tail ? tail->mean : 0.0;
  double over2 = 0, over3 = 0, over4 = 0, cen2 = 0, cen3 = 0, cen4 = 0;
  static_assert(kTailK.size() == 3, "one counter per k");
#pragma omp parallel for schedule(dynamic, 16) reduction(+ : over2, over3, over4, cen2, cen3, cen4)
  for (int i = 0; i < T; ++i) {
    std::vector<float> z(static_cast<size_t>(i + 1));
    float* row = A + size_t(i) * T;
    std::fill(row, row + T, 0.f);
    for (int j = 0; j <= i; ++j) {
      z[size_t(j)] = a.scale * dot(q + size_t(i) * D, k + size_t(j) * D, D);
      if (tail) {
        const double x = std::fabs(double(z[size_t(j)]));
        over2 += x > kTailK[0] * sig;
        over3 += x > kTailK[1] * sig;
        over4 += x > kTailK[2] * sig;
        const double c = std::fabs(double(z[size_t(j)]) - mu);
        cen2 += c > kTailK[0] * sig;
        cen3 += c > kTailK[1] * sig;
        cen4 += c > kTailK[2] * sig;
      }
    }
    const float tau = a.tau ? a.tau[i] : 0.f;
    switch (math) {
      case AttnMath::kSoftmax: {  // a_ij = exp(s_ij - m_i) / sum_t exp(s_it - m_i)
        float m = -INFINITY;
        for (int j = 0; j <= i; ++j) m = std::max(m, z[size_t(j)]);
        double l = 0;
        for (int j = 0; j <= i; ++j) l += (row[j] = std::exp(z[size_t(j)] - m));
        for (int j = 0; j <= i; ++j) row[j] = float(row[j] / l);
        break;
      }
      case AttnMath::kSoftplus: {  // a_ij = softplus(s_ij) / sum_t softplus(s_it)
        double F = 0;
        for (int j = 0; j <= i; ++j) F += (row[j] = attn::SoftplusPolicy::softplus(z[size_t(j)]));
        for (int j = 0; j <= i; ++j) row[j] = float(row[j] / F);
        break;
      }
      case AttnMath::kEntmax:
        if (a.entmax_bisect) {  // the kernel's own solver: p = max(am1 z - tau, 0)^(1/am1) / norm
          const float am1 = a.entmax_alpha - 1.f;
          float norm = 1.f;
          const float t = attn::Entmax::bisect(z.data(), i + 1, a.entmax_iters, am1, &norm);
          for (int j = 0; j <= i; ++j) row[j] = attn::Entmax::prob(z[size_t(j)], t, norm, am1);
        } else {
          entmax15_row(z.data(), i + 1, row);
        }
        break;
      case AttnMath::kRelu:  // a_ij = max(s_ij, 0)
        for (int j = 0; j <= i; ++j)
          row[j] = attn::ThresholdPolicy::weight({}, z[size_t(j)], 0.f, 1);
        break;
      case AttnMath::kThreshold:  // a_ij = max(s_ij - tau_i, 0)^p
        for (int j = 0; j <= i; ++j)
          row[j] = attn::ThresholdPolicy::weight({}, z[size_t(j)], tau, a.power);
        break;
      default:
        break;  // excluded by single_view_math()
    }
  }
  if (tail) {
    tail->over[0] += over2;
    tail->over[1] += over3;
    tail->over[2] += over4;
    tail->centred[0] += cen2;
    tail->centred[1] += cen3;
    tail->centred[2] += cen4;
    tail->n += double(T) * (T + 1) / 2;
  }
}

// The math of each view of a two-view kind (the kind itself for single-view kinds).
AttnMath single_view_math(AttnMath m) {
  if (m == AttnMath::kDiffSoftmax) return AttnMath::kSoftmax;
  if (m == AttnMath::kDiffRelu) return AttnMath::kRelu;
  if (m == AttnMath::kDiffThreshold) return AttnMath::kThreshold;
  TDA_CHECK(m == AttnMath::kSoftmax || m == AttnMath::kSoftplus || m == AttnMath::kEntmax ||
                m == AttnMath::kRelu || m == AttnMath::kThreshold,
            "diag: unexpected attention math");
  return m;
}

}  // namespace

std::vector<std::string> view_names(AttnMath m) {
  if (attn_two_views(m)) return {"effective", "view1", "view2"};
  return {"effective"};
}

std::vector<std::string> score_view_names(AttnMath m) {
  if (attn_two_views(m)) return {"view1", "view2"};
  return {"view1"};
}

const float* kernel_query(const AttnArgs& a, int b, int h, std::vector<float>& keep) {
  const size_t sqk = a.qk_bh_stride ? a.qk_bh_stride : size_t(a.T) * a.Dqk;
  const float* q = a.q + (size_t(b) * a.H + h) * sqk;
  if (!a.q_scale) return q;
  TDA_CHECK(attn_q_scale_ok(a), kAttnQScaleError);
  // The kernels' own product, q'_hi = f_hi q_hi in fp32 (the CPU kernel's scaled copy, bit for
  // bit): the maps and scores are then those of the numbers the kernel compares.
  const float* f = a.q_scale + size_t(h) * size_t(a.q_scale_h_stride);
  const int D = a.Dqk;
  keep.resize(size_t(a.T) * D);
  for (int i = 0; i < a.T; ++i)
    for (int d = 0; d < D; ++d) keep[size_t(i) * D + d] = f[i] * q[size_t(i) * D + d];
  return keep.data();
}

std::vector<std::vector<float>> materialize_head(const AttnArgs& a, int b, int h,
                                                 TailCount* tails) {
  TDA_CHECK(a.q_start == 0, "diag: maps need every query row (q_start == 0)");
  const size_t TT = size_t(a.T) * a.T;
  const size_t sqk = a.qk_bh_stride ? a.qk_bh_stride : size_t(a.T) * a.Dqk;
  const size_t off = (size_t(b) * a.H + h) * sqk;
  const AttnMath single = single_view_math(a.math);
  AttnArgs x = a;
  if (single == AttnMath::kRelu) x.tau = nullptr;  // the kernel ignores tau for ReLU kinds
  if (!attn_two_views(a.math)) {
    std::vector<std::vector<float>> v(1, std::vector<float>(TT));
    std::vector<float> scaled;
    view_map(x, single, kernel_query(a, b, h, scaled), a.k + off, v[0].data(), tails);
    return v;
  }
  std::vector<std::vector<float>> v(3, std::vector<float>(TT));
  view_map(x, single, a.q + off, a.k + off, v[1].data(), tails);
  view_map(x, single, a.q2 + off, a.k2 + off, v[2].data(), tails ? tails + 1 : nullptr);
  // effective map: A = A^1 - lambda A^2 (lambda already clamped / re-parameterised)
  const float lam = *a.lambda;
  for (size_t e = 0; e < TT; ++e) v[0][e] = v[1][e] - lam * v[2][e];
  return v;
}

LayerMaps materialize_maps(const AttnArgs& a, int b) {
  LayerMaps L;
  L.math = a.math;
  L.H = a.H;
  L.T = a.T;
  L.lambda = attn_two_views(a.math) ? *a.lambda : 0.f;
  for (int h = 0; h < a.H; ++h) L.head_views.push_back(materialize_head(a, b, h));
  return L;
}

namespace {
// counter += v for a counter in `ops`'s memory.
void add_counter(Ops& ops, long long* counter, long long v) {
  if (!counter) return;
  long long c = 0;
  ops.download(&c, counter, sizeof c);
  c += v;
  ops.upload(counter, &c, sizeof c);
}

// n floats at p (the backend's memory) on the host, in `keep`.
const float* host_copy(Ops& ops, const float* p, size_t n, std::vector<float>& keep) {
  if (!p) return nullptr;
  keep.resize(n);
  ops.download(keep.data(), p, n * sizeof(float));
  return keep.data();
}
}  // namespace

void ProbeOps::attention_forward(const AttnArgs& a) {
  // The kernel's tile counters live in the backend's memory, like everything it writes.
  DeviceArray<long long> counters(in_, 2, "attention tile counters");
  const long long zeros[2] = {0, 0};
  counters.upload(zeros, 2);
  AttnArgs counted = a;
  counted.tiles_skipped = counters.data();
  counted.tiles_total = counters.data() + 1;
  in_.attention_forward(counted);
  long long n[2];
  counters.download(n, 2);
  add_counter(in_, a.tiles_skipped, n[0]);
  add_counter(in_, a.tiles_total, n[1]);
  tiles.emplace_back(n[0], n[1]);
  calls.push_back(a);
  // The maps are built on the host from batch element 0: on a device backend, from copies of its
  // q, k (q2, k2), tau and query row scale. Head h starts h * sqk floats in; the last head's T x
  // Dqk rows end it.
  AttnArgs h = a;
  std::vector<float> q, k, q2, k2, tau, q_scale, lambda;
  if (!in_.host_memory()) {
    const size_t sqk = a.qk_bh_stride ? a.qk_bh_stride : size_t(a.T) * a.Dqk;
    const size_t span = size_t(a.H - 1) * sqk + size_t(a.T) * a.Dqk;
    h.q = host_copy(in_, a.q, span, q);
    h.k = host_copy(in_, a.k, span, k);
    h.q2 = host_copy(in_, a.q2, span, q2);
    h.k2 = host_copy(in_, a.k2, span, k2);
    h.tau = host_copy(in_, a.tau, size_t(a.T), tau);
    const size_t n_scale = a.q_scale_h_stride
                               ? size_t(a.H - 1) * size_t(a.q_scale_h_stride) + size_t(a.T)
                               : size_t(a.T);
    h.q_scale = host_copy(in_, a.q_scale, n_scale, q_scale);
    h.lambda = host_copy(in_, a.lambda, 1, lambda);
  }
  if (keep_maps) layers.push_back(materialize_maps(h, 0));
  if (on_attention) on_attention(h);
}

}  // namespace tda
