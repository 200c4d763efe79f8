// The ops interface: every numeric operation the model needs, on buffers owned by one backend.
// The model (src/model) and the attention variants (src/attention) only call these; the CPU
// backend (backend/cpu) implements them in fp32 and is the reference for every other backend.
//
// Conventions: row-major; a weight W of a linear layer is (out, in) as in PyTorch, so
// y = x W^T. Backward functions ACCUMULATE into weight gradients (gradient accumulation over
// micro-batches) and OVERWRITE input gradients unless the name says otherwise.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace tda {

class Bf16Matmuls;  // backend/mixed_precision.h

// Arguments of the streaming attention kernels. One struct for all mechanisms; each mechanism
// sets the fields it uses (src/attention/policies.h holds the per-mechanism math). Tensors are
// (B, H, T, D) contiguous unless qk_bh_stride says otherwise. Per-row statistics `stats` are
// (B, H, T, n_stats) with n_stats = attn_n_stats(math).
//   kSoftmax      a = softmax_j(scale q.k)                      stats: LSE
//   kEntmax       a = alpha-entmax(scale q.k) (sort: 1.5 only, or bisection)
//                                               stats: tau (frame (alpha-1) z), norm
//   kSoftplus     a = softplus(s) / sum_j softplus(s)           stats: F = sum_j softplus(s)
//   kRelu         a = max(s, 0)                                  stats: none
//   kThreshold    a = max(s - tau_i, 0)^p                        stats: none
//   kDiffSoftmax  out = A1 V - lambda A2 V, out2 = A2 V          stats: LSE1, LSE2
//   kDiffRelu     a = max(s1,0) - lambda max(s2,0)               stats: none
//   kDiffThreshold a = max(s1-tau,0)^p - lambda max(s2-tau,0)^p  stats: none
enum class AttnMath {
  kSoftmax,
  kEntmax,
  kSoftplus,
  kRelu,
  kThreshold,
  kDiffSoftmax,
  kDiffRelu,
  kDiffThreshold
};

inline int attn_n_stats(AttnMath m) {
  switch (m) {
    case AttnMath::kSoftmax:
    case AttnMath::kSoftplus:
      return 1;
    case AttnMath::kEntmax:
    case AttnMath::kDiffSoftmax:
      return 2;
    default:
      return 0;
  }
}
inline const char* attn_math_name(AttnMath m) {
  switch (m) {
    case AttnMath::kSoftmax:
      return "softmax";
    case AttnMath::kEntmax:
      return "entmax";
    case AttnMath::kSoftplus:
      return "softplus";
    case AttnMath::kRelu:
      return "relu";
    case AttnMath::kThreshold:
      return "threshold";
    case AttnMath::kDiffSoftmax:
      return "diff_softmax";
    case AttnMath::kDiffRelu:
      return "diff_relu";
    case AttnMath::kDiffThreshold:
      return "diff_threshold";
  }
  return "?";
}
inline bool attn_two_views(AttnMath m) {
  return m == AttnMath::kDiffSoftmax || m == AttnMath::kDiffRelu || m == AttnMath::kDiffThreshold;
}

struct AttnArgs {
  AttnMath math = AttnMath::kSoftmax;
  int B = 0, H = 0, T = 0, Dqk = 0, Dv = 0;
  float scale = 0.f;  // score scale, 1/sqrt(Dqk) for dot-product kinds (1 for cosine kinds)
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  // Second view (differential kinds): same shape and stride as q, k.
  const float* q2 = nullptr;
  const float* k2 = nullptr;
  // Distance between consecutive (b, h) slices of q, k, q2, k2 in floats; 0 means T * Dqk.
  // Lets the Diff layout (components 2h and 2h+1 of one buffer) be read without a copy.
  size_t qk_bh_stride = 0;
  // Threshold kinds: tau_i per query position (T), shared by batch and heads; power p.
  const float* tau = nullptr;
  int power = 2;
  // Two-view kinds: the weight of view 2, one float in this backend's memory (a device scalar:
  // kernels read it, the host never does), already clamped / re-parameterised by the variant
  // (Ops::clamp_affine, Ops::diff_lambda).
  const float* lambda = nullptr;
  // Entmax: alpha in (1, 2] and the threshold solver (false = exact sort, alpha 1.5 only; true =
  // bisection with `entmax_iters` steps, any alpha).
  float entmax_alpha = 1.5f;
  bool entmax_bisect = false;
  int entmax_iters = 30;
  float* out = nullptr;    // (B, H, T, Dv)
  float* out2 = nullptr;   // kDiffSoftmax: A2 V (B, H, T, Dv), needed for D2 and dlambda
  float* stats = nullptr;  // per-row statistics saved by forward for backward
  // Optional diagnostics (forward): survivors per row (B, H, T, 1 or 3 for two views:
  // [view1, view2, both]); tiles skipped because every weight in them is zero, and tiles seen.
  float* survivors = nullptr;
  long long* tiles_skipped = nullptr;
  long long* tiles_total = nullptr;
  // CUDA entmax threshold pre-pass: the 64 x 64 score tiles it computed (its passes over a
  // block's key tiles, summed over the blocks).
  long long* entmax_threshold_tiles = nullptr;
  bool no_skip = false;  // disable tile skipping (tests compare against it)
  // Forward only: rows i < q_start are skipped (out/out2 rows written as 0, stats and
  // survivors untouched); row i >= q_start is exactly what a full forward computes for it.
  // KV-cache decoding (model/generator.h) computes only the new rows. Backward requires 0.
  int q_start = 0;
  // backward
  const float* dout = nullptr;
  float* dq = nullptr;
  float* dk = nullptr;
  float* dv = nullptr;
  float* dq2 = nullptr;  // same layout as q2
  float* dk2 = nullptr;
  // Per-row partials of scalar gradients (B, H, T), written (not accumulated) by backward; the
  // variant reduces them in a fixed order so the result is deterministic.
  float* drow_tau = nullptr;     // dL/dtau_i = -sum_j (ds1_ij + ds2_ij)     (threshold kinds)
  float* drow_lambda = nullptr;  // dL/dlambda contribution of row i          (two-view kinds)
  // Test hook: drop one term of the backward (normalised kinds: the row constant D_i / c_i;
  // rectifiers: the factor p of p r^(p-1), replaced by 1.5). Used only by negative controls.
  bool debug_drop_term = false;
};

// Every pointer member of AttnArgs, for the emulator's strict mode, which checks that each one a
// kernel receives is device memory (docs/emulator.md); a member missing here is reported there.
template <class F>
void device_pointers(const AttnArgs& a, F&& f) {
  f(a.q, "q");
  f(a.k, "k");
  f(a.v, "v");
  f(a.q2, "q2");
  f(a.k2, "k2");
  f(a.tau, "tau");
  f(a.lambda, "lambda");
  f(a.out, "out");
  f(a.out2, "out2");
  f(a.stats, "stats");
  f(a.survivors, "survivors");
  f(a.tiles_skipped, "tiles_skipped");
  f(a.tiles_total, "tiles_total");
  f(a.entmax_threshold_tiles, "entmax_threshold_tiles");
  f(a.dout, "dout");
  f(a.dq, "dq");
  f(a.dk, "dk");
  f(a.dv, "dv");
  f(a.dq2, "dq2");
  f(a.dk2, "dk2");
  f(a.drow_tau, "drow_tau");
  f(a.drow_lambda, "drow_lambda");
}

class Ops {
 public:
  virtual ~Ops() = default;
  virtual const char* name() const = 0;

  // y(N,OC) = x(N,C) W(OC,C)^T
  virtual void matmul_forward(float* y, const float* x, const float* W, int N, int C, int OC) = 0;
  // dx(N,C) = dy W (overwrite, or add when accumulate_dx); dW(OC,C) += dy^T x.
  // dx or dW may be null to skip that product.
  virtual void matmul_backward(float* dx, float* dW, const float* dy, const float* x,
                               const float* W, int N, int C, int OC, bool accumulate_dx) = 0;
  // The two ends of the MLP's GELU, for backends that fuse it into the GEMM (CUDA: cuBLASLt's
  // GELU_AUX / DGELU epilogues) and save a pass over the (N, 4C) activation. The defaults in
  // ops.cpp compose matmul_* and gelu_* above, so CpuOps is the reference for both.
  // pre(N,OC) = x(N,C) W(OC,C)^T;  y = gelu(pre)  (tanh form, as gelu_forward).
  virtual void matmul_gelu_forward(float* y, float* pre, const float* x, const float* W, int N,
                                   int C, int OC);
  // dpre(N,C) = (dy(N,OC) W(OC,C)) * gelu'(pre(N,C))  (overwrite);  dW(OC,C) += dy^T x, skipped
  // when dW is null. x is this matmul's input, i.e. gelu(pre) as the forward stored it.
  virtual void matmul_backward_dgelu(float* dpre, float* dW, const float* dy, const float* x,
                                     const float* W, const float* pre, int N, int C, int OC);

  // RMSNorm over the last dim C: y = w * x / rms(x), rstd(N) = 1/sqrt(mean(x^2)+eps) saved.
  virtual void rmsnorm_forward(float* y, float* rstd, const float* x, const float* w, int N, int C,
                               float eps) = 0;
  // dx += ..., dw += ...  (dx accumulates: the residual stream's gradient flows through it)
  virtual void rmsnorm_backward(float* dx, float* dw, const float* dy, const float* x,
                                const float* w, const float* rstd, int N, int C) = 0;

  // GELU, tanh approximation (GPT-2).
  virtual void gelu_forward(float* y, const float* x, size_t n) = 0;
  virtual void gelu_backward(float* dx, const float* x, const float* dy, size_t n) = 0;

  virtual void add(float* y, const float* a, const float* b, size_t n) = 0;
  virtual void add_inplace(float* y, const float* a, size_t n) = 0;
  // y = a s x + b y over n floats (b == 0: y is only written, as in BLAS). s: null (1), or one
  // float in this backend's memory, a coefficient the host does not read (a learned scalar).
  virtual void axpby(float* y, float a, const float* x, float b, size_t n,
                     const float* s = nullptr) = 0;

  // y(N,C) = wte[tokens]; dwte[tokens] += dy, rows of one token summed in increasing n.
  // plan: embedding_plan() of the same tokens (backend/embedding_plan.h), built on the host and
  // uploaded with them, for backends that group the rows by token (CUDA); CpuOps walks tokens.
  virtual void embedding_forward(float* y, const int32_t* tokens, const float* wte, int N,
                                 int C) = 0;
  virtual void embedding_backward(float* dwte, const float* dy, const int32_t* tokens,
                                  const int32_t* plan, int N, int C) = 0;

  // Rotary embedding on one head slice per (b, t, h): x points at row (b*T + t) of a (B*T, row)
  // matrix, head h occupies columns [col0 + h*D, col0 + (h+1)*D). Result written to
  // out (B, H, T, D). cos/sin are (T_max, D/2) tables; pairs are (c, c + D/2) (GPT-NeoX style).
  virtual void rope_forward(float* out, const float* x, int row, int col0, const float* cos,
                            const float* sin, int B, int T, int H, int D, int pos0) = 0;
  // Transpose rotation: dx (B*T, row) columns of the head slice = R^T dout. Overwrites.
  virtual void rope_backward(float* dx, const float* dout, int row, int col0, const float* cos,
                             const float* sin, int B, int T, int H, int D, int pos0) = 0;
  // Plain head split/merge between (B*T, row)[col0 + h*D + d] and (B, H, T, D).
  virtual void split_heads(float* out, const float* x, int row, int col0, int B, int T, int H,
                           int D) = 0;
  virtual void merge_heads(float* x, const float* in, int row, int col0, int B, int T, int H,
                           int D) = 0;

  // Fused LM head + cross-entropy over the real vocabulary (padded logits excluded), chunked
  // over rows so that no (N, V) logits buffer exists. losses(N) are per-token losses.
  // If dx != null: dx(N,C) = dlogits W and dW += dlogits^T x with dlogits = grad_scale*(p - y).
  virtual void lm_head_loss(float* losses, float* dx, float* dW, const float* x, const float* W,
                            const int32_t* targets, int N, int C, int V_padded, int V_real,
                            float grad_scale) = 0;
  // Logits of one row (for sampling): logits(V_padded) = x(C) W^T.
  virtual void lm_head_logits(float* logits, const float* x, const float* W, int C, int V) = 0;

  // Streaming attention (no T x T buffer).
  virtual void attention_forward(const AttnArgs& a) = 0;
  virtual void attention_backward(const AttnArgs& a) = 0;

  // Optimizer pieces.
  virtual double sum_squares(const float* x, size_t n) = 0;
  virtual void scale(float* x, size_t n, float s) = 0;
  // AdamW with decoupled weight decay; step t >= 1 for bias correction.
  virtual void adamw(float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1,
                     float beta2, float eps, float wd, int t) = 0;
  // The optimizer's pass over one tensor: AdamW on g * grad_scale (global-norm clipping; 1: none),
  // then g = 0, so the next step accumulates into zeros without a zeroing pass of its own. The
  // default in ops.cpp composes scale, adamw and zero; the CPU backend does it in one pass.
  virtual void adamw_clip_zero(float* p, float* g, float* m, float* v, size_t n, float lr,
                               float beta1, float beta2, float eps, float wd, int t,
                               float grad_scale);
  virtual void zero(float* x, size_t n) = 0;

  // Pre/post pieces of the attention variants (attention-variants.md §0.1), so that every
  // variant runs on any backend's memory. Rows are contiguous runs of D floats.
  //
  // L2 normalisation in place (F.normalize): x~ = x / max(|x|, 1e-12), norm[n] = |x_n|.
  virtual void l2norm_forward(float* x, float* norm, size_t N, int D) = 0;
  // In place, dx~ -> dx:  dx = (dx~ - x~ (x~.dx~)) / |x|  (|x| > 1e-12;  else dx = dx~ * 1e12).
  virtual void l2norm_backward(float* dx, const float* xhat, const float* norm, size_t N,
                               int D) = 0;
  // out[n] = sum_d a[n D + d] b[n D + d]  (per-row partials; head_row_sum reduces them)
  virtual void row_dot(float* out, const float* a, const float* b, size_t N, int D) = 0;
  // Per-head reduction of (B, H, T) row values into a parameter gradient, in a fixed order
  // (bit-exact resume):  dst[h] += scale * sum_{b,t} w[t] x[(b H + h) T + t]  (w null: 1).
  // H = 1 with B = batch*heads sums everything into dst[0].
  virtual void head_row_sum(float* dst, const float* x, const float* w, float scale, int B, int H,
                            int T) = 0;
  // TRA/TDA row thresholds on the device, from the (device) scalar beta without a host read:
  //   out_i = g(beta) c_i,  c_i = sqrt(2 max(0, log((i+1)/kappa)) / d)   (i < T, c_i in double)
  // g = max(beta, 0) (tau_i), or its derivative [beta > 0] (the weights of dbeta = sum_i c_i
  // [beta > 0] dL/dtau_i). beta null: the fixed value beta_fixed instead.
  virtual void threshold_tau(float* out, const float* beta, float beta_fixed, bool derivative,
                             int T, double kappa, int d) = 0;
  // Small parameters of the variants on the device, so that no micro-step reads one on the host
  // (docs/perf.md: host syncs). One thread does each (they are a few floats); the CPU backend
  // computes the same float expressions in the same order.
  //   out[0] = clamp(v, lo, hi), out[1] = [lo <= v <= hi] (1 or 0),  v = a x[0] + b
  // (TDA's lambda_c = clamp(lambda, 0, 1) and the gate of its gradient; dex's annealed lambda).
  virtual void clamp_affine(float* out, const float* x, float a, float b, float lo, float hi) = 0;
  // The Diff kinds' view-2 weight from four d-vectors:  out = {e1, e2, lambda},
  //   e_t = exp(lq_t . lk_t) (dot products in float, d = 0..d-1 in order),
  //   lambda = e1 - e2 + init.
  virtual void diff_lambda(float* out, const float* lq1, const float* lk1, const float* lq2,
                           const float* lk2, int d, float init) = 0;
  // Its backward, with dl = dl_sum[0] (dL/dlambda) and e = diff_lambda's out:
  //   dlq1 += (dl e1) lk1,  dlk1 += (dl e1) lq1,  dlq2 += (-dl e2) lk2,  dlk2 += (-dl e2) lq2.
  virtual void diff_lambda_backward(float* dlq1, float* dlk1, float* dlq2, float* dlk2,
                                    const float* lq1, const float* lk1, const float* lq2,
                                    const float* lk2, const float* e, const float* dl_sum,
                                    int d) = 0;
  // Length factors per (head, position):  f[h T + i] = s_h (log(i+1) / div) + b_h  (i < T),
  // s null: s_h = 1, b null: b_h = 0 (ssmax's s_h log n_i + b_h; lssa's log(n_i) / log(base)).
  virtual void position_scales(float* f, const float* s, const float* b, float div, int H,
                               int T) = 0;
  // Per-(head, position) scale of a (B, H, T, D) tensor: y[b,h,t,:] = f[h f_head_stride + t]
  // x[b,h,t,:] (y may be x; f_head_stride 0 shares one row of T factors between heads).
  virtual void scale_rows(float* y, const float* x, const float* f, int f_head_stride, int B, int H,
                          int T, int D) = 0;
  // Output gate on N rows of C: y[n,c] *= sigmoid(z[n z_stride + c / group])  (group 1: one gate
  // per channel; group D: one per head).
  virtual void sigmoid_gate_forward(float* y, const float* z, int z_stride, int N, int C,
                                    int group) = 0;
  // Its backward, gam = sigmoid(z), o the ungated output:  g[n,c] = dy[n,c] gam (written);
  // dz[n dz_stride + k] = sum_{c / group = k} dy o gam (1 - gam)  (written, not accumulated).
  // g may alias o (each element of o is read before g's is written).
  virtual void sigmoid_gate_backward(float* g, float* dz, int dz_stride, const float* dy,
                                     const float* o, const float* z, int z_stride, int N, int C,
                                     int group) = 0;
  // ReLA's output norm over all C channels of a token (rela.cpp has the formulas):
  //   center false: r = sqrt(mean(u^2) + eps), y = gamma u / r * (w ? sigmoid(w u) : 1)
  //   center true:  mu = mean(u), r = sqrt(mean((u-mu)^2) + eps), y = gamma (u - mu) / r  (w null)
  // r(N), mu(N) saved for the backward (mu = 0 when not centred).
  virtual void rela_norm_forward(float* y, float* r, float* mu, const float* u, const float* gamma,
                                 const float* w, int N, int C, float eps, bool center) = 0;
  // du (N,C) overwritten; dgamma (C) and dw (C, gated only) accumulated, reduced over tokens in
  // a fixed order.
  virtual void rela_norm_backward(float* du, float* dgamma, float* dw, const float* dy,
                                  const float* u, const float* r, const float* mu,
                                  const float* gamma, const float* w, int N, int C,
                                  bool center) = 0;

  // Memory of this backend. Every buffer the ops above read or write comes from alloc_bytes()
  // (through DeviceArray, backend/device_array.h). Host code may dereference such a buffer only
  // when host_memory() is true; otherwise it moves data with upload/download. The defaults are
  // host memory (the CPU backend); the CUDA backend overrides them with device memory.
  virtual bool host_memory() const { return true; }
  // 64-byte aligned, contents unspecified. `what` names the buffer ("activation arena", "AdamW
  // m") in an out-of-memory error and in the emulator's memory report.
  virtual void* alloc_bytes(size_t bytes, const std::string& what);
  // Throws only for a pointer alloc_bytes() did not return (a bug); after a device fault it
  // returns quietly: DeviceArray destructors free while the fault's error unwinds the stack.
  virtual void free_bytes(void* p);
  virtual void upload(void* dst, const void* host_src, size_t bytes);
  virtual void download(void* host_dst, const void* src, size_t bytes);
  virtual void copy(void* dst, const void* src, size_t bytes);  // within this backend's memory

  // Optional capability: bf16 GEMM inputs over fp32 master weights (null: none). A query, not a
  // dynamic_cast, so that decorators (ForwardingOps) pass it on. GPT2 alone uses it.
  virtual Bf16Matmuls* bf16_matmuls() { return nullptr; }
};

}  // namespace tda
