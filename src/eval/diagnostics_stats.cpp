// Statistics of materialised attention maps and raw scores (diagnostics.h; the definitions are
// in docs/diagnostics.md).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "eval/diagnostics.h"

namespace tda {

namespace {

// Per row i of a causal map: sink_i = |A_i0| / (S_i + eps) with S_i = sum_{t<=i} |A_it|, the
// effective entropy H_i = -sum_j p^ log p^ (p^_ij = |A_ij| / (S_i + eps), 0 log 0 := 0), and the
// survivors nz_i = #{j <= i: A_ij != 0}.
struct Rows {
  std::vector<double> sink, H;
  std::vector<int> nz;
  double max_abs = 0;
};

Rows row_pass(const float* A, int T, double eps) {
  Rows r;
  r.sink.resize(size_t(T));
  r.H.resize(size_t(T));
  r.nz.resize(size_t(T));
  for (int i = 0; i < T; ++i) {
    const float* row = A + size_t(i) * T;
    double S = 0;
    int nz = 0;
    for (int j = 0; j <= i; ++j) {
      const double x = std::fabs(double(row[j]));
      S += x;
      r.max_abs = std::max(r.max_abs, x);
      if (row[j] != 0.f) ++nz;
    }
    double H = 0;
    for (int j = 0; j <= i; ++j) {
      const double p = std::fabs(double(row[j])) / (S + eps);
      if (p > 0) H -= p * std::log(p);
    }
    r.sink[size_t(i)] = std::fabs(double(row[0])) / (S + eps);
    r.H[size_t(i)] = H;
    r.nz[size_t(i)] = nz;
  }
  return r;
}

}  // namespace

MapStats map_stats(const float* A, int T, double eps) {
  const Rows r = row_pass(A, T, eps);
  MapStats s;
  double surv = 0, dead = 0, Hsum = 0, ratio_sum = 0, sink = 0, unif = 0;
  for (int i = 0; i < T; ++i) {
    const size_t u = size_t(i);
    surv += r.nz[u];
    dead += r.nz[u] == 0;
    Hsum += r.H[u];
    if (i >= 1) ratio_sum += r.H[u] / std::log(double(i + 1));  // H_i / log n_i, n_i = i + 1
    // gSinkRatio(0): A~_0 = 1/T sum_i sink_i,  A~unif_0 = 1/T sum_i 1/(i+1)
    sink += r.sink[u];
    unif += 1.0 / double(i + 1);
  }
  const double causal = double(T) * (T + 1) / 2;
  s.sparsity = (causal - surv) / causal;
  s.max_abs = r.max_abs;
  s.mean_survivors = surv / T;
  s.dead_rows = dead / T;
  s.mean_entropy = Hsum / T;
  s.mean_dispersion = T > 1 ? ratio_sum / (T - 1) : 0.0;
  s.gsink0 = sink / unif;  // the 1/T factors cancel
  return s;
}

DiagGrid make_grid(int T) {
  TDA_CHECK(T >= 1, "diag: grid over an empty sequence");
  DiagGrid g;
  for (int n = 16; n < T; n *= 2) g.lengths.push_back(n);
  g.lengths.push_back(T);
  for (int lo = 1; lo <= T; lo *= 2) g.row_bins.emplace_back(lo, std::min(2 * lo, T + 1));
  return g;
}

namespace {
// Mean of per-row values v_i over each row bin (rows with n_i = i + 1 in [lo, hi)).
template <class V>
std::vector<double> bin_means(const std::vector<V>& v, const DiagGrid& g) {
  std::vector<double> out;
  for (const auto& [lo, hi] : g.row_bins) {
    double s = 0;
    for (int n = lo; n < hi; ++n) s += double(v[size_t(n - 1)]);
    out.push_back(s / (hi - lo));
  }
  return out;
}
}  // namespace

MapCurves map_curves(const float* A, int T, const DiagGrid& g, double eps) {
  const Rows r = row_pass(A, T, eps);
  MapCurves c;
  // Prefix n: gSinkRatio(1) = sum_{i<n} sink_i / sum_{i<n} 1/(i+1), survivors = sum nz_i / n.
  double sink = 0, unif = 0, surv = 0;
  size_t next = 0;
  for (int i = 0; i < T && next < g.lengths.size(); ++i) {
    sink += r.sink[size_t(i)];
    unif += 1.0 / double(i + 1);
    surv += r.nz[size_t(i)];
    if (i + 1 == g.lengths[next]) {
      c.gsink0.push_back(sink / unif);
      c.survivors.push_back(surv / (i + 1));
      ++next;
    }
  }
  TDA_CHECK(next == g.lengths.size(), "diag: grid longer than the map");
  c.row_survivors = bin_means(r.nz, g);
  return c;
}

std::vector<double> consensus_row_survivors(const float* A1, const float* A2, int T,
                                            const DiagGrid& g) {
  std::vector<int> both(size_t(T), 0);
  for (int i = 0; i < T; ++i)
    for (int j = 0; j <= i; ++j) {
      const size_t e = size_t(i) * T + j;
      both[size_t(i)] += A1[e] != 0.f && A2[e] != 0.f;
    }
  return bin_means(both, g);
}

double causal_pearson(const float* A, const float* B, int T) {
  // Two passes (means, then centred sums) in double. A map whose causal entries are all equal
  // has no variance: the correlation is undefined (the paper omits such layers).
  const double n = double(T) * (T + 1) / 2;
  double ma = 0, mb = 0;
  bool const_a = true, const_b = true;
  for (int i = 0; i < T; ++i)
    for (int j = 0; j <= i; ++j) {
      const size_t e = size_t(i) * T + j;
      ma += A[e];
      mb += B[e];
      const_a = const_a && A[e] == A[0];
      const_b = const_b && B[e] == B[0];
    }
  if (const_a || const_b) return std::numeric_limits<double>::quiet_NaN();
  ma /= n;
  mb /= n;
  double sab = 0, saa = 0, sbb = 0;
  for (int i = 0; i < T; ++i)
    for (int j = 0; j <= i; ++j) {
      const size_t e = size_t(i) * T + j;
      const double a = A[e] - ma, b = B[e] - mb;
      sab += a * b;
      saa += a * a;
      sbb += b * b;
    }
  return sab / std::sqrt(saa * sbb);
}

double ScoreMoments::sigma() const {
  if (n <= 0) return 0.0;
  const double m = sum / n;
  return std::sqrt(std::max(0.0, sum2 / n - m * m));
}

ScoreMoments score_moments(const float* q, const float* k, int T, int D, float scale) {
  std::vector<double> K(size_t(D), 0.0), M(size_t(D) * D, 0.0);  // M: upper triangle used
  ScoreMoments m;
  for (int i = 0; i < T; ++i) {
    const float* ki = k + size_t(i) * D;
    for (int d = 0; d < D; ++d) {
      K[size_t(d)] += ki[d];
      for (int e = d; e < D; ++e) M[size_t(d) * D + e] += double(ki[d]) * ki[e];
    }
    const float* qi = q + size_t(i) * D;
    double s1 = 0, s2 = 0;
    for (int d = 0; d < D; ++d) {
      s1 += qi[d] * K[size_t(d)];
      s2 += M[size_t(d) * D + d] * qi[d] * qi[d];
      for (int e = d + 1; e < D; ++e) s2 += 2.0 * M[size_t(d) * D + e] * qi[d] * qi[e];
    }
    m.n += i + 1;
    m.sum += scale * s1;
    m.sum2 += double(scale) * scale * s2;
  }
  return m;
}

}  // namespace tda
