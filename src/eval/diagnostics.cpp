// Attention diagnostics: see diagnostics.h and attention-variants.md §13.
#include "eval/diagnostics.h"

#include <algorithm>
#include <cmath>

#include "attention/policies.h"
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

// One view's map of head h: scores s_ij = scale q_i.k_j (j <= i) turned into weights.
void view_map(const AttnArgs& a, AttnMath math, const float* q, const float* k, float* A) {
  const int T = a.T, D = a.Dqk;
  std::vector<float> z(static_cast<size_t>(T));
  for (int i = 0; i < T; ++i) {
    float* row = A + size_t(i) * T;
    std::fill(row, row + T, 0.f);
    for (int j = 0; j <= i; ++j)
      z[size_t(j)] = a.scale * dot(q + size_t(i) * D, k + size_t(j) * D, D);
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
      case AttnMath::kEntmax15:
        if (a.entmax_bisect) {  // the kernel's own solver: p = max(z/2 - tau, 0)^2 / norm
          float norm = 1.f;
          const float t = attn::Entmax15::bisect(z.data(), i + 1, a.entmax_iters, &norm);
          for (int j = 0; j <= i; ++j) row[j] = attn::Entmax15::prob(z[size_t(j)], t, norm);
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
        throw Error("diag: unexpected single-view math");
    }
  }
}

}  // namespace

MapStats map_stats(const float* A, int T, double eps) {
  MapStats s;
  double zeros = 0, surv = 0, dead = 0, Hsum = 0, ratio_sum = 0, sink = 0, unif = 0;
  for (int i = 0; i < T; ++i) {
    const float* row = A + size_t(i) * T;
    double S = 0;  // S_i = sum_{t<=i} |A_it|
    int nz = 0;
    for (int j = 0; j <= i; ++j) {
      const double x = std::fabs(double(row[j]));
      S += x;
      s.max_abs = std::max(s.max_abs, x);
      if (row[j] != 0.f) ++nz;
    }
    zeros += (i + 1 - nz);
    surv += nz;
    if (nz == 0) dead += 1;
    // p^_ij = |A_ij| / (S_i + eps);  H_i = -sum_j p^ log p^  (0 log 0 := 0)
    double H = 0;
    for (int j = 0; j <= i; ++j) {
      const double p = std::fabs(double(row[j])) / (S + eps);
      if (p > 0) H -= p * std::log(p);
    }
    Hsum += H;
    if (i >= 1) ratio_sum += H / std::log(double(i + 1));  // H_i / log n_i, n_i = i + 1
    // gSinkRatio(0): A~_0 = 1/T sum_i |A_i0| / (S_i + eps),  A~unif_0 = 1/T sum_i 1/(i+1)
    sink += std::fabs(double(row[0])) / (S + eps);
    unif += 1.0 / double(i + 1);
  }
  s.sparsity = zeros / (double(T) * (T + 1) / 2);
  s.mean_survivors = surv / T;
  s.dead_rows = dead / T;
  s.mean_entropy = Hsum / T;
  s.mean_dispersion = T > 1 ? ratio_sum / (T - 1) : 0.0;
  s.gsink0 = sink / unif;  // the 1/T factors cancel
  return s;
}

std::vector<std::string> view_names(AttnMath m) {
  if (attn_two_views(m)) return {"effective", "view1", "view2"};
  return {"effective"};
}

LayerMaps materialize_maps(const AttnArgs& a, int b) {
  TDA_CHECK(a.q_start == 0, "diag: maps need every query row (q_start == 0)");
  LayerMaps L;
  L.math = a.math;
  L.H = a.H;
  L.T = a.T;
  L.lambda = a.lambda;
  const size_t TT = size_t(a.T) * a.T;
  const size_t sqk = a.qk_bh_stride ? a.qk_bh_stride : size_t(a.T) * a.Dqk;
  const bool two = attn_two_views(a.math);
  AttnMath single = a.math;
  if (a.math == AttnMath::kDiffSoftmax) single = AttnMath::kSoftmax;
  if (a.math == AttnMath::kDiffRelu) single = AttnMath::kRelu;
  if (a.math == AttnMath::kDiffThreshold) single = AttnMath::kThreshold;
  AttnArgs x = a;
  if (single == AttnMath::kRelu) x.tau = nullptr;  // the kernel ignores tau for ReLU kinds
  L.head_views.resize(size_t(a.H));
  for (int h = 0; h < a.H; ++h) {
    const size_t off = (size_t(b) * a.H + h) * sqk;
    auto& v = L.head_views[size_t(h)];
    v.assign(two ? 3 : 1, std::vector<float>(TT, 0.f));
    if (!two) {
      view_map(x, single, a.q + off, a.k + off, v[0].data());
      continue;
    }
    view_map(x, single, a.q + off, a.k + off, v[1].data());
    view_map(x, single, a.q2 + off, a.k2 + off, v[2].data());
    // effective map: A = A^1 - lambda A^2 (lambda already clamped / re-parameterised)
    for (size_t e = 0; e < TT; ++e) v[0][e] = v[1][e] - a.lambda * v[2][e];
  }
  return L;
}

json stats_json(const MapStats& s) {
  return {{"sparsity", s.sparsity},
          {"max_abs", s.max_abs},
          {"gsink0", s.gsink0},
          {"mean_entropy", s.mean_entropy},
          {"mean_dispersion", s.mean_dispersion},
          {"mean_survivors", s.mean_survivors},
          {"dead_rows", s.dead_rows}};
}

namespace {
// Running mean of stats (max_abs: running max).
struct StatsAcc {
  MapStats sum;
  int n = 0;
  void add(const MapStats& s) {
    sum.sparsity += s.sparsity;
    sum.max_abs = std::max(sum.max_abs, s.max_abs);
    sum.gsink0 += s.gsink0;
    sum.mean_entropy += s.mean_entropy;
    sum.mean_dispersion += s.mean_dispersion;
    sum.mean_survivors += s.mean_survivors;
    sum.dead_rows += s.dead_rows;
    ++n;
  }
  MapStats mean() const {
    MapStats m = sum;
    const double k = n ? 1.0 / n : 0.0;
    m.sparsity *= k;
    m.gsink0 *= k;
    m.mean_entropy *= k;
    m.mean_dispersion *= k;
    m.mean_survivors *= k;
    m.dead_rows *= k;
    return m;
  }
};
}  // namespace

json run_diagnostics(GPT2& model, ProbeOps& probe, const std::vector<int32_t>& tokens,
                     const DiagOptions& opt) {
  const int T = int(tokens.size());
  TDA_CHECK(T >= 1, "diag: empty token sequence");
  probe.layers.clear();
  probe.calls.clear();
  probe.tiles.clear();
  std::vector<float> logits(size_t(model.config().vocab_size));
  model.forward_logits(tokens.data(), T, logits.data());
  const int n_layer = model.config().n_layer;
  TDA_CHECK(
      int(probe.layers.size()) == n_layer,
      "diag: expected one attention call per layer, got " + std::to_string(probe.layers.size()));
  const auto names = view_names(probe.layers[0].math);
  json out;
  out["kind"] = model.attention().kind();
  out["T"] = T;
  out["n_layer"] = n_layer;
  out["views"] = names;
  out["layers"] = json::array();
  std::vector<StatsAcc> global(names.size());
  long long skipped = 0, total = 0;
  for (int l = 0; l < n_layer; ++l) {
    const LayerMaps& L = probe.layers[size_t(l)];
    json jl;
    jl["layer"] = l;
    jl["lambda"] = L.lambda;
    jl["tiles_skipped"] = probe.tiles[size_t(l)].first;
    jl["tiles_total"] = probe.tiles[size_t(l)].second;
    skipped += probe.tiles[size_t(l)].first;
    total += probe.tiles[size_t(l)].second;
    jl["heads"] = json::array();
    std::vector<StatsAcc> layer(names.size());
    for (int h = 0; h < L.H; ++h) {
      json jh;
      jh["head"] = h;
      for (size_t v = 0; v < names.size(); ++v) {
        const MapStats s = map_stats(L.head_views[size_t(h)][v].data(), T);
        jh[names[v]] = stats_json(s);
        layer[v].add(s);
        global[v].add(s);
      }
      jl["heads"].push_back(jh);
    }
    for (size_t v = 0; v < names.size(); ++v) jl[names[v]] = stats_json(layer[v].mean());
    out["layers"].push_back(jl);
  }
  json means;
  for (size_t v = 0; v < names.size(); ++v) means[names[v]] = stats_json(global[v].mean());
  out["means"] = means;
  out["tiles"] = {{"skipped", skipped},
                  {"total", total},
                  {"skipped_fraction", total ? double(skipped) / double(total) : 0.0}};
  if (opt.dump_layer >= 0) {
    TDA_CHECK(opt.dump_layer < n_layer, "diag: --dump-map layer out of range");
    const LayerMaps& L = probe.layers[size_t(opt.dump_layer)];
    TDA_CHECK(opt.dump_head >= 0 && opt.dump_head < L.H, "diag: --dump-map head out of range");
    json d = {{"layer", opt.dump_layer}, {"head", opt.dump_head}, {"T", T}};
    for (size_t v = 0; v < names.size(); ++v) {
      const auto& A = L.head_views[size_t(opt.dump_head)][v];
      json rows = json::array();
      for (int i = 0; i < T; ++i)
        rows.push_back(
            std::vector<float>(A.begin() + size_t(i) * T, A.begin() + size_t(i + 1) * T));
      d[names[v]] = rows;
    }
    out["dump"] = d;
  }
  return out;
}

}  // namespace tda
