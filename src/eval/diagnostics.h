// Attention diagnostics (attention-variants.md §13): materialise the effective attention map of
// every (layer, head) for ONE sequence in fp32 and reduce it to the paper's statistics.
//
// How the maps are obtained without touching any variant: the model runs its ordinary eval
// forward on a ProbeOps, an Ops that forwards every call to a real backend and, on each
// attention_forward, rebuilds A (T x T, causal, zeros above the diagonal) from the kernel's own
// AttnArgs (q, k after RoPE / L2-normalisation / length scaling, tau_i, p, lambda, scale). This
// is a non-fused reference path: O(T^2) memory, diagnostics only.
//
//   softmax kinds     A_ij = softmax_j(scale q_i.k_j)            (before gate or W_D)
//   entmax            A_ij = entmax_1.5(scale q_i.k_j)
//   lssa              A_ij = softplus(s_ij) / sum_t softplus(s_it)
//   rela              A_ij = max(s_ij, 0)
//   tra               A_ij = max(s_ij - tau_i, 0)^p
//   two-view kinds    A = A^1 - lambda A^2  (view 1, view 2 reported as well)
#pragma once
#include <cstdint>
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

// Maps of one attention call (one layer): per head, views[0] = effective map, and for two-view
// kinds views[1] = view 1, views[2] = view 2. Each is T x T.
struct LayerMaps {
  AttnMath math = AttnMath::kSoftmax;
  int H = 0, T = 0;
  float lambda = 0.f;
  std::vector<std::vector<std::vector<float>>> head_views;  // [h][view][T*T]
};
// Rebuild the maps of batch element b from the arguments of one attention_forward call.
LayerMaps materialize_maps(const AttnArgs& a, int b = 0);

// Ops decorator: forwards everything to `inner`; attention_forward also records LayerMaps.
class ProbeOps final : public ForwardingOps {
 public:
  explicit ProbeOps(Ops& inner) : ForwardingOps(inner) {}
  std::vector<LayerMaps> layers;  // one entry per attention_forward call, in call order
  // The raw arguments of each call: their pointers stay valid until the model's next
  // set_batch (they point into its activation buffers). Tests recompute entries from them.
  std::vector<AttnArgs> calls;
  // 64 x 64 (query block, key tile) pairs of each call that the kernel skipped because no
  // weight in them survives (threshold kinds; 0 for the others), and all causal pairs.
  std::vector<std::pair<long long, long long>> tiles;
  const char* name() const override { return "probe"; }
  void attention_forward(const AttnArgs& a) override {
    AttnArgs counted = a;
    long long skipped = 0, total = 0;
    counted.tiles_skipped = &skipped;
    counted.tiles_total = &total;
    in_.attention_forward(counted);
    if (a.tiles_skipped) *a.tiles_skipped += skipped;
    if (a.tiles_total) *a.tiles_total += total;
    tiles.emplace_back(skipped, total);
    calls.push_back(a);
    layers.push_back(materialize_maps(a, 0));
  }
};

// Names of the views of a LayerMaps: {"effective"} or {"effective", "view1", "view2"}.
std::vector<std::string> view_names(AttnMath m);

struct DiagOptions {
  int dump_layer = -1, dump_head = -1;  // write this head's maps into the JSON (-1: none)
};

// Runs `model` (built on `probe`, weights loaded) in eval mode on tokens[0..T) with B = 1 and
// returns the §13 report:
// { kind, T, views, layers: [ {layer, tiles_skipped, tiles_total, heads: [ {head, <view>: stats} ],
//   <view>: layer stats} ], means: {<view>: stats}, tiles: {skipped, total, skipped_fraction},
//   dump: {layer, head, T, <view>: [[row 0], [row 1], ...]} }.
// Layer stats are means over heads, except max_abs which is the max over heads (panel b).
nlohmann::json run_diagnostics(GPT2& model, ProbeOps& probe, const std::vector<int32_t>& tokens,
                               const DiagOptions& opt);

nlohmann::json stats_json(const MapStats& s);

}  // namespace tda
