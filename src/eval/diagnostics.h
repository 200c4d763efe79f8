// Attention diagnostics (docs/attention.md §13, the paper's Figure 1 and Appendix C):
// materialise the attention maps of every (layer, head) in fp32 and reduce them to the paper's
// statistics, averaged over one or more sequences. docs/diagnostics.md.
//
// How the maps are obtained without touching any variant: the model runs its ordinary eval
// forward on a ProbeOps, an Ops that forwards every call to a real backend and, on each
// attention_forward, rebuilds A (T x T, causal, zeros above the diagonal) from the kernel's own
// AttnArgs (q, k after RoPE / L2-normalisation, q's row scale, tau_i, p, lambda, scale). This
// is a non-fused reference path: O(T^2) memory per head, diagnostics only. The model's forward
// runs on the wrapped backend (any device); on a device backend the probe downloads batch
// element 0's q, k (tau, q's row scale) of each call and builds the maps on the host.
//
//   softmax kinds     A_ij = softmax_j(scale q_i.k_j)            (before gate or W_D)
//   entmax            A_ij = entmax_1.5(scale q_i.k_j)
//   lssa              A_ij = softplus(s_ij) / sum_t softplus(s_it)
//   rela              A_ij = max(s_ij, 0)
//   tra               A_ij = max(s_ij - tau_i, 0)^p
//   two-view kinds    A = A^1 - lambda A^2  (view 1, view 2 reported as well)
// with q_i the query the kernel compares: f_i q_i where the kind sets a row scale (ssmax, lssa).
// tests/test_diag_consistency.cpp holds every kind's maps to its kernel's output.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "backend/forwarding_ops.h"
#include "backend/ops.h"
#include "core/config.h"
#include "model/gpt2.h"

namespace tda {

// Statistics of one causal map A (T x T row-major; only j <= i is read).
struct MapStats {
  double sparsity = 0;         // #{j<=i: A_ij == 0} / (T(T+1)/2)
  double max_abs = 0;          // max_{j<=i} |A_ij|
  double gsink0 = 0;           // gSinkRatio(k = 0) (the paper's gSinkRatio(1))
  double mean_entropy = 0;     // mean_i H_i over all rows (dead rows count with H = 0)
  double mean_dispersion = 0;  // mean_{i>=1} H_i / log(i+1)
  double mean_survivors = 0;   // mean_i #{j<=i: A_ij != 0}
  double dead_rows = 0;        // fraction of rows with all A_ij == 0
};
MapStats map_stats(const float* A, int T, double eps = 1e-12);

// Where the curves are sampled. A causal map of the first n tokens is the top-left n x n block
// of the map of a longer sequence (every kind's row i depends on keys j <= i and on i only), so
// one forward at length T gives every context length n <= T.
struct DiagGrid {
  std::vector<int> lengths;                   // context lengths n: 16, 32, 64, ... (< T), T
  std::vector<std::pair<int, int>> row_bins;  // rows with n_i = i + 1 in [lo, hi): 1, 2-3, 4-7..
};
DiagGrid make_grid(int T);

// Curves of one causal map over a grid.
struct MapCurves {
  std::vector<double> gsink0;         // per length n: gSinkRatio(1) of the n x n prefix
  std::vector<double> survivors;      // per length n: mean_{i<n} #{j<=i: A_ij != 0}
  std::vector<double> row_survivors;  // per row bin: mean #{j<=i: A_ij != 0} over its rows
};
MapCurves map_curves(const float* A, int T, const DiagGrid& g, double eps = 1e-12);

// Per row bin, the mean number of keys that survive in both views (A1_ij != 0 and A2_ij != 0):
// the paper's consensus survivors C_i (its Theorem: E[C_i] <= kappa^2 / (i+1) for noise keys).
std::vector<double> consensus_row_survivors(const float* A1, const float* A2, int T,
                                            const DiagGrid& g);

// Pearson correlation of two maps over the causal entries j <= i; NaN when either map is
// constant there (e.g. a thresholded view with no survivor), where it is undefined.
double causal_pearson(const float* A, const float* B, int T);

// Raw scores s_ij = scale q_i.k_j of one view over the causal pairs: count, sum, sum of squares.
struct ScoreMoments {
  double n = 0, sum = 0, sum2 = 0;
  void add(const ScoreMoments& o) {
    n += o.n;
    sum += o.sum;
    sum2 += o.sum2;
  }
  double mean() const { return n > 0 ? sum / n : 0.0; }
  double sigma() const;  // population standard deviation
};
// In O(T D^2) without forming the scores: sum_{j<=i} s_ij = scale q_i.K_i and
// sum_{j<=i} s_ij^2 = scale^2 q_i^T M_i q_i with K_i = sum_{j<=i} k_j, M_i = sum_{j<=i} k_j k_j^T.
ScoreMoments score_moments(const float* q, const float* k, int T, int D, float scale);

// Tail counts #{(i, j <= i): |s_ij| > k sigma} for k in kTailK (the paper's Appendix C table),
// and centred at the mean, |s_ij - mean| > k sigma; mean and sigma fixed beforehand (the layer's,
// over all heads).
constexpr std::array<double, 3> kTailK = {2.0, 3.0, 4.0};
struct TailCount {
  double sigma = 0, mean = 0;  // of the scores, from score_moments
  std::array<double, 3> over{}, centred{};
  double n = 0;
};

// Maps of one attention call (one layer): per head, views[0] = effective map, and for two-view
// kinds views[1] = view 1, views[2] = view 2. Each is T x T.
struct LayerMaps {
  AttnMath math = AttnMath::kSoftmax;
  int H = 0, T = 0;
  float lambda = 0.f;
  std::vector<std::vector<std::vector<float>>> head_views;  // [h][view][T*T]
};
// q of head h of batch element b as the kernel compares it: with a query row scale
// (AttnArgs::q_scale: ssmax's s log n, lssa's log_base n), q'_hi = f_hi q_hi, in `keep`. The maps
// and the score tails read the view-1 query only through here, so a kind that hands the kernel a
// row scale is measured with it.
const float* kernel_query(const AttnArgs& a, int b, int h, std::vector<float>& keep);
// The maps of head h of batch element b ([view][T*T]). `tails` (one per score view: view 1, and
// view 2 for two-view kinds), when given, counts the scores beyond k * tails[v].sigma.
std::vector<std::vector<float>> materialize_head(const AttnArgs& a, int b, int h,
                                                 TailCount* tails = nullptr);
// Rebuild the maps of batch element b from the arguments of one attention_forward call.
LayerMaps materialize_maps(const AttnArgs& a, int b = 0);

// Ops decorator: forwards everything to `inner`; attention_forward also observes the call.
class ProbeOps final : public ForwardingOps {
 public:
  explicit ProbeOps(Ops& inner) : ForwardingOps(inner) {}
  // Keep every call's maps in `layers` (tests read them). run_diagnostics turns this off and
  // reduces each call's maps head by head in `on_attention` (memory O(T^2), not O(L H T^2)).
  bool keep_maps = true;
  // Called after the kernel with the call's arguments, their q, k, q2, k2, tau, q_scale and
  // lambda in host memory (copies when the backend's memory is not the host's), valid during the
  // call.
  std::function<void(const AttnArgs&)> on_attention;
  std::vector<LayerMaps> layers;  // one entry per attention_forward call, in call order
  // The raw arguments of each call: their pointers (the backend's memory) stay valid until the
  // model's next set_batch (they point into its activation buffers). Tests recompute entries
  // from them.
  std::vector<AttnArgs> calls;
  // 64 x 64 (query block, key tile) pairs of each call that the kernel skipped because no
  // weight in them survives (threshold kinds; 0 for the others), and all causal pairs.
  std::vector<std::pair<long long, long long>> tiles;
  const char* name() const override { return "probe"; }
  void attention_forward(const AttnArgs& a) override;
};

// Names of the views of a LayerMaps: {"effective"} or {"effective", "view1", "view2"}.
std::vector<std::string> view_names(AttnMath m);
// Names of the score views (tail statistics): {"view1"} or {"view1", "view2"}.
std::vector<std::string> score_view_names(AttnMath m);

// Everything measured on one layer of one sequence (batch element 0 of one attention call).
struct LayerDiag {
  float lambda = 0.f;
  std::vector<std::vector<MapStats>> stats;    // [head][view]
  std::vector<std::vector<MapCurves>> curves;  // [head][view]
  std::vector<std::vector<double>> consensus;  // [head][row bin] (two-view kinds)
  std::vector<double> pearson;                 // [head]: view 1 vs view 2 (two-view kinds)
  std::vector<TailCount> tails;                // [score view], pooled over heads
};
// dump (optional): receives head dump_head's maps.
LayerDiag analyse_layer(const AttnArgs& a, const DiagGrid& g, int dump_head = -1,
                        std::vector<std::vector<float>>* dump = nullptr);

struct DiagOptions {
  int dump_layer = -1, dump_head = -1;  // write this head's maps into the JSON (-1: none)
  // RoPE tables are built up to this length (the model's NTK factor applied); sequences may be
  // this long. <= 0: the model's trained context, seq_len * max(1, rope_ntk_factor).
  int max_context = 0;
};

// Runs `model` (built on `probe`, weights loaded) in eval mode on each sequence (B = 1, all of
// the same length T) and returns the report, every number the mean over sequences:
// { kind, T, sequences, n_layer, n_head, views, score_views, grid: {lengths, row_bins}, tail_k,
//   layers: [ {layer, lambda, tiles_skipped, tiles_total, heads: [ {head, <view>: stats} ],
//              <view>: layer stats, curves: {<view>: curves, consensus: {row_survivors}},
//              tails: {<score view>: {sigma, p: [...]}}, cross_view: {pearson, heads_defined}} ],
//   means: {<view>: stats}, curves: {<view>: curves}, tiles: {skipped, total, skipped_fraction},
//   dump: {layer, head, T, <view>: [[row 0], [row 1], ...]} }.
// Layer stats are means over heads, except max_abs which is the max over heads (panel b).
nlohmann::json run_diagnostics(GPT2& model, ProbeOps& probe,
                               const std::vector<std::vector<int32_t>>& sequences,
                               const DiagOptions& opt);

nlohmann::json stats_json(const MapStats& s);

}  // namespace tda
