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
#include <vector>

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
class ProbeOps final : public Ops {
 public:
  explicit ProbeOps(Ops& inner) : in_(inner) {}
  std::vector<LayerMaps> layers;  // one entry per attention_forward call, in call order
  // The raw arguments of each call: their pointers stay valid until the model's next
  // set_batch (they point into its activation buffers). Tests recompute entries from them.
  std::vector<AttnArgs> calls;
  const char* name() const override { return "probe"; }
  void matmul_forward(float* y, const float* x, const float* W, int N, int C, int OC) override {
    in_.matmul_forward(y, x, W, N, C, OC);
  }
  void matmul_backward(float* dx, float* dW, const float* dy, const float* x, const float* W, int N,
                       int C, int OC, bool acc) override {
    in_.matmul_backward(dx, dW, dy, x, W, N, C, OC, acc);
  }
  void rmsnorm_forward(float* y, float* rstd, const float* x, const float* w, int N, int C,
                       float eps) override {
    in_.rmsnorm_forward(y, rstd, x, w, N, C, eps);
  }
  void rmsnorm_backward(float* dx, float* dw, const float* dy, const float* x, const float* w,
                        const float* rstd, int N, int C) override {
    in_.rmsnorm_backward(dx, dw, dy, x, w, rstd, N, C);
  }
  void gelu_forward(float* y, const float* x, size_t n) override { in_.gelu_forward(y, x, n); }
  void gelu_backward(float* dx, const float* x, const float* dy, size_t n) override {
    in_.gelu_backward(dx, x, dy, n);
  }
  void add(float* y, const float* a, const float* b, size_t n) override { in_.add(y, a, b, n); }
  void add_inplace(float* y, const float* a, size_t n) override { in_.add_inplace(y, a, n); }
  void embedding_forward(float* y, const int32_t* t, const float* wte, int N, int C) override {
    in_.embedding_forward(y, t, wte, N, C);
  }
  void embedding_backward(float* dwte, const float* dy, const int32_t* t, int N, int C) override {
    in_.embedding_backward(dwte, dy, t, N, C);
  }
  void rope_forward(float* out, const float* x, int row, int col0, const float* cos,
                    const float* sin, int B, int T, int H, int D, int pos0) override {
    in_.rope_forward(out, x, row, col0, cos, sin, B, T, H, D, pos0);
  }
  void rope_backward(float* dx, const float* dout, int row, int col0, const float* cos,
                     const float* sin, int B, int T, int H, int D, int pos0) override {
    in_.rope_backward(dx, dout, row, col0, cos, sin, B, T, H, D, pos0);
  }
  void split_heads(float* out, const float* x, int row, int col0, int B, int T, int H,
                   int D) override {
    in_.split_heads(out, x, row, col0, B, T, H, D);
  }
  void merge_heads(float* x, const float* in, int row, int col0, int B, int T, int H,
                   int D) override {
    in_.merge_heads(x, in, row, col0, B, T, H, D);
  }
  void lm_head_loss(float* losses, float* dx, float* dW, const float* x, const float* W,
                    const int32_t* targets, int N, int C, int Vp, int Vr, float gs) override {
    in_.lm_head_loss(losses, dx, dW, x, W, targets, N, C, Vp, Vr, gs);
  }
  void lm_head_logits(float* logits, const float* x, const float* W, int C, int V) override {
    in_.lm_head_logits(logits, x, W, C, V);
  }
  void attention_forward(const AttnArgs& a) override {
    in_.attention_forward(a);
    calls.push_back(a);
    layers.push_back(materialize_maps(a, 0));
  }
  void attention_backward(const AttnArgs& a) override { in_.attention_backward(a); }
  double sum_squares(const float* x, size_t n) override { return in_.sum_squares(x, n); }
  void scale(float* x, size_t n, float s) override { in_.scale(x, n, s); }
  void adamw(float* p, const float* g, float* m, float* v, size_t n, float lr, float b1, float b2,
             float eps, float wd, int t) override {
    in_.adamw(p, g, m, v, n, lr, b1, b2, eps, wd, t);
  }
  bool host_memory() const override { return in_.host_memory(); }
  void* alloc_bytes(size_t bytes) override { return in_.alloc_bytes(bytes); }
  void free_bytes(void* p) override { in_.free_bytes(p); }
  void upload(void* d, const void* s, size_t b) override { in_.upload(d, s, b); }
  void download(void* d, const void* s, size_t b) override { in_.download(d, s, b); }
  void copy(void* d, const void* s, size_t b) override { in_.copy(d, s, b); }
  void zero(float* x, size_t n) override { in_.zero(x, n); }

 private:
  Ops& in_;
};

// Names of the views of a LayerMaps: {"effective"} or {"effective", "view1", "view2"}.
std::vector<std::string> view_names(AttnMath m);

struct DiagOptions {
  int dump_layer = -1, dump_head = -1;  // write this head's maps into the JSON (-1: none)
};

// Runs `model` (built on `probe`, weights loaded) in eval mode on tokens[0..T) with B = 1 and
// returns the §13 report:
// { kind, T, views, layers: [ {layer, heads: [ {head, <view>: stats} ], <view>: layer stats} ],
//   means: {<view>: stats}, dump: {layer, head, T, <view>: [[row 0], [row 1], ...]} }.
// Layer stats are means over heads, except max_abs which is the max over heads (panel b).
nlohmann::json run_diagnostics(GPT2& model, ProbeOps& probe, const std::vector<int32_t>& tokens,
                               const DiagOptions& opt);

nlohmann::json stats_json(const MapStats& s);

}  // namespace tda
