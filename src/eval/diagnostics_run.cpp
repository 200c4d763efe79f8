// run_diagnostics: one layer's maps at a time, reduced to the statistics of diagnostics.h and
// averaged over sequences (docs/diagnostics.md).
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "eval/diagnostics.h"
#include "model/generator.h"
#include "model/rope.h"

namespace tda {

LayerDiag analyse_layer(const AttnArgs& a, const DiagGrid& g, int dump_head,
                        std::vector<std::vector<float>>* dump) {
  const int T = a.T, nv = int(view_names(a.math).size());
  const bool two = attn_two_views(a.math);
  const size_t sqk = a.qk_bh_stride ? a.qk_bh_stride : size_t(T) * a.Dqk;
  LayerDiag d;
  d.lambda = two ? *a.lambda : 0.f;
  // The tails need the layer's sigma (all heads) before any score is counted: the moments come
  // in closed form from q and k, the counting happens while the maps are built.
  std::vector<ScoreMoments> mom(two ? 2 : 1);
  std::vector<float> scaled;
  for (int h = 0; h < a.H; ++h) {
    mom[0].add(
        score_moments(kernel_query(a, 0, h, scaled), a.k + size_t(h) * sqk, T, a.Dqk, a.scale));
    if (two)
      mom[1].add(score_moments(a.q2 + size_t(h) * sqk, a.k2 + size_t(h) * sqk, T, a.Dqk, a.scale));
  }
  d.tails.resize(mom.size());
  for (size_t v = 0; v < mom.size(); ++v) {
    d.tails[v].sigma = mom[v].sigma();
    d.tails[v].mean = mom[v].mean();
  }
  d.stats.resize(size_t(a.H));
  d.curves.resize(size_t(a.H));
  for (int h = 0; h < a.H; ++h) {
    auto maps = materialize_head(a, 0, h, d.tails.data());
    for (int v = 0; v < nv; ++v) {
      d.stats[size_t(h)].push_back(map_stats(maps[size_t(v)].data(), T));
      d.curves[size_t(h)].push_back(map_curves(maps[size_t(v)].data(), T, g));
    }
    if (two) {
      d.consensus.push_back(consensus_row_survivors(maps[1].data(), maps[2].data(), T, g));
      d.pearson.push_back(causal_pearson(maps[1].data(), maps[2].data(), T));
    }
    if (dump && h == dump_head) *dump = std::move(maps);
  }
  return d;
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

// Sums for means. MapStats: every field averaged, except that max_abs is a running max when
// `max_of_max` (heads within a layer, and the global number: the paper's panel b).
struct StatsAcc {
  MapStats sum;
  int n = 0;
  void add(const MapStats& s, bool max_of_max) {
    sum.sparsity += s.sparsity;
    sum.max_abs = max_of_max ? std::max(sum.max_abs, s.max_abs) : sum.max_abs + s.max_abs;
    sum.gsink0 += s.gsink0;
    sum.mean_entropy += s.mean_entropy;
    sum.mean_dispersion += s.mean_dispersion;
    sum.mean_survivors += s.mean_survivors;
    sum.dead_rows += s.dead_rows;
    ++n;
  }
  MapStats mean(bool max_of_max) const {
    MapStats m = sum;
    const double k = n ? 1.0 / n : 0.0;
    m.sparsity *= k;
    if (!max_of_max) m.max_abs *= k;
    m.gsink0 *= k;
    m.mean_entropy *= k;
    m.mean_dispersion *= k;
    m.mean_survivors *= k;
    m.dead_rows *= k;
    return m;
  }
};

struct VecAcc {  // element-wise mean of equal-length vectors
  std::vector<double> sum;
  int n = 0;
  void add(const std::vector<double>& v) {
    if (sum.empty()) sum.assign(v.size(), 0.0);
    for (size_t i = 0; i < v.size(); ++i) sum[i] += v[i];
    ++n;
  }
  std::vector<double> mean() const {
    std::vector<double> m = sum;
    for (auto& x : m) x /= std::max(n, 1);
    return m;
  }
};

struct CurvesAcc {
  VecAcc gsink0, survivors, row_survivors;
  void add(const MapCurves& c) {
    gsink0.add(c.gsink0);
    survivors.add(c.survivors);
    row_survivors.add(c.row_survivors);
  }
  json to_json() const {
    return {{"gsink0", gsink0.mean()},
            {"survivors", survivors.mean()},
            {"row_survivors", row_survivors.mean()}};
  }
};

// One layer over all sequences.
struct LayerAcc {
  float lambda = 0.f;
  long long tiles_skipped = 0, tiles_total = 0;
  std::vector<std::vector<StatsAcc>> stats;  // [head][view], over sequences
  std::vector<CurvesAcc> curves;             // [view], over sequences and heads
  VecAcc consensus;                          // over sequences and heads
  double pearson_sum = 0;
  int pearson_defined = 0, pearson_total = 0;
  std::vector<double> sigma, mean;           // [score view], sums over sequences
  std::vector<std::array<double, 3>> p, pc;  // [score view][k], sums over sequences
  int sequences = 0;

  void add(const LayerDiag& d) {
    const size_t H = d.stats.size(), nv = d.stats[0].size();
    if (stats.empty()) {
      stats.assign(H, std::vector<StatsAcc>(nv));
      curves.resize(nv);
      sigma.assign(d.tails.size(), 0.0);
      mean.assign(d.tails.size(), 0.0);
      p.assign(d.tails.size(), {0, 0, 0});
      pc.assign(d.tails.size(), {0, 0, 0});
    }
    lambda = d.lambda;
    for (size_t h = 0; h < H; ++h)
      for (size_t v = 0; v < nv; ++v) {
        stats[h][v].add(d.stats[h][v], false);
        curves[v].add(d.curves[h][v]);
      }
    for (const auto& c : d.consensus) consensus.add(c);
    for (double r : d.pearson) {
      ++pearson_total;
      if (std::isnan(r)) continue;
      pearson_sum += r;
      ++pearson_defined;
    }
    for (size_t v = 0; v < d.tails.size(); ++v) {
      sigma[v] += d.tails[v].sigma;
      mean[v] += d.tails[v].mean;
      for (size_t k = 0; k < kTailK.size(); ++k) {
        p[v][k] += d.tails[v].over[k] / d.tails[v].n;
        pc[v][k] += d.tails[v].centred[k] / d.tails[v].n;
      }
    }
    ++sequences;
  }
};

}  // namespace

json run_diagnostics(GPT2& model, ProbeOps& probe, const std::vector<std::vector<int32_t>>& seqs,
                     const DiagOptions& opt) {
  TDA_CHECK(!seqs.empty() && !seqs[0].empty(), "diag: no tokens");
  const int T = int(seqs[0].size());
  for (const auto& s : seqs) TDA_CHECK(int(s.size()) == T, "diag: sequences of unequal length");
  const ModelConfig& mc = model.config();
  const int max_ctx = opt.max_context > 0 ? opt.max_context : rope_trained_context(mc);
  TDA_CHECK(T <= max_ctx, "diag: sequences of " + std::to_string(T) +
                              " tokens are longer than the context " + std::to_string(max_ctx) +
                              " (set --max-context to go past the trained length)");
  const int n_layer = mc.n_layer;
  const DiagGrid g = make_grid(T);
  std::vector<LayerAcc> acc(static_cast<size_t>(n_layer));
  std::vector<std::vector<float>> dump;
  AttnMath math = AttnMath::kSoftmax;
  int H = 0, call = 0, seq = 0;
  const bool keep = probe.keep_maps;
  probe.keep_maps = false;
  probe.on_attention = [&](const AttnArgs& a) {
    TDA_CHECK(call < n_layer, "diag: more attention calls than layers");
    math = a.math;
    H = a.H;
    const bool dump_here = seq == 0 && call == opt.dump_layer;
    if (dump_here)
      TDA_CHECK(opt.dump_head >= 0 && opt.dump_head < a.H, "diag: --dump-map head out of range");
    const LayerDiag d = analyse_layer(a, g, dump_here ? opt.dump_head : -1, &dump);
    acc[size_t(call)].add(d);
    ++call;
  };
  struct Restore {  // the probe outlives this call: leave it as it was, even on an error
    ProbeOps& p;
    bool keep;
    ~Restore() {
      p.calls.clear();  // they point into the generator's buffers, gone with it
      p.on_attention = nullptr;
      p.keep_maps = keep;
    }
  } restore{probe, keep};
  TDA_CHECK(opt.dump_layer < n_layer, "diag: --dump-map layer out of range");
  // One prefill chunk of T rows: one attention call per layer computing every row (q_start 0),
  // with RoPE tables up to max_ctx.
  Generator gen(model, max_ctx, T);
  for (seq = 0; seq < int(seqs.size()); ++seq) {
    call = 0;
    probe.calls.clear();
    probe.tiles.clear();
    gen.prefill(seqs[size_t(seq)]);
    TDA_CHECK(call == n_layer,
              "diag: expected one attention call per layer, got " + std::to_string(call));
    for (int l = 0; l < n_layer; ++l) {
      acc[size_t(l)].tiles_skipped += probe.tiles[size_t(l)].first;
      acc[size_t(l)].tiles_total += probe.tiles[size_t(l)].second;
    }
  }

  const auto names = view_names(math);
  const auto snames = score_view_names(math);
  json out;
  out["kind"] = model.attention().kind();
  out["T"] = T;
  out["sequences"] = seqs.size();
  out["max_context"] = max_ctx;
  out["trained_context"] = rope_trained_context(mc);
  out["n_layer"] = n_layer;
  out["n_head"] = H;
  out["views"] = names;
  out["score_views"] = snames;
  json bins = json::array();
  for (const auto& [lo, hi] : g.row_bins) bins.push_back({lo, hi});
  out["grid"] = {{"lengths", g.lengths}, {"row_bins", bins}};
  out["tail_k"] = kTailK;
  out["layers"] = json::array();
  std::vector<StatsAcc> global(names.size());
  std::vector<CurvesAcc> global_curves(names.size());
  long long skipped = 0, total = 0;
  for (int l = 0; l < n_layer; ++l) {
    const LayerAcc& A = acc[size_t(l)];
    json jl;
    jl["layer"] = l;
    jl["lambda"] = A.lambda;
    jl["tiles_skipped"] = A.tiles_skipped;
    jl["tiles_total"] = A.tiles_total;
    skipped += A.tiles_skipped;
    total += A.tiles_total;
    jl["heads"] = json::array();
    std::vector<StatsAcc> layer(names.size());
    for (int h = 0; h < H; ++h) {
      json jh;
      jh["head"] = h;
      for (size_t v = 0; v < names.size(); ++v) {
        const MapStats s = A.stats[size_t(h)][v].mean(false);
        jh[names[v]] = stats_json(s);
        layer[v].add(s, true);
        global[v].add(s, true);
      }
      jl["heads"].push_back(jh);
    }
    json curves;
    for (size_t v = 0; v < names.size(); ++v) {
      jl[names[v]] = stats_json(layer[v].mean(true));
      curves[names[v]] = A.curves[v].to_json();
      global_curves[v].gsink0.add(A.curves[v].gsink0.mean());
      global_curves[v].survivors.add(A.curves[v].survivors.mean());
      global_curves[v].row_survivors.add(A.curves[v].row_survivors.mean());
    }
    if (A.consensus.n) curves["consensus"] = {{"row_survivors", A.consensus.mean()}};
    jl["curves"] = curves;
    json tails;
    for (size_t v = 0; v < snames.size(); ++v) {
      std::vector<double> p, pc;
      for (size_t k = 0; k < kTailK.size(); ++k) {
        p.push_back(A.p[v][k] / A.sequences);
        pc.push_back(A.pc[v][k] / A.sequences);
      }
      tails[snames[v]] = {{"sigma", A.sigma[v] / A.sequences},
                          {"mean", A.mean[v] / A.sequences},
                          {"p", p},
                          {"p_centred", pc}};
    }
    jl["tails"] = tails;
    if (attn_two_views(math))
      jl["cross_view"] = {
          {"pearson", A.pearson_defined ? json(A.pearson_sum / A.pearson_defined) : json()},
          {"defined", A.pearson_defined},
          {"total", A.pearson_total}};
    out["layers"].push_back(jl);
  }
  json means, curves;
  for (size_t v = 0; v < names.size(); ++v) {
    means[names[v]] = stats_json(global[v].mean(true));
    curves[names[v]] = global_curves[v].to_json();
  }
  out["means"] = means;
  out["curves"] = curves;
  out["tiles"] = {{"skipped", skipped},
                  {"total", total},
                  {"skipped_fraction", total ? double(skipped) / double(total) : 0.0}};
  if (opt.dump_layer >= 0) {
    json d = {{"layer", opt.dump_layer}, {"head", opt.dump_head}, {"T", T}};
    for (size_t v = 0; v < names.size(); ++v) {
      const auto& A = dump[v];
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
