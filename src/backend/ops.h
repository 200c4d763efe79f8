// The ops interface: every numeric operation the model needs, on buffers owned by one backend.
// The model (src/model) and the attention variants (src/attention) only call these; the CPU
// backend (backend/cpu) implements them in fp32 and is the reference for every other backend.
// The ops themselves, with their math and conventions, are one list: backend/ops.def. This file
// adds the attention kernels' arguments and the memory every backend manages.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace tda {

class Bf16Matmuls;  // backend/mixed_precision.h
class Device;       // backend/device.h

// A target that does not count (lm_head_loss): its loss is 0 and its row gets no gradient, as
// PyTorch's cross_entropy(ignore_index=...). The synthetic tasks (data/synthetic.h) score only
// their query positions with it; the caller divides by the targets that count.
constexpr int32_t kIgnoreTarget = -1;

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
  // Optional row scale of the queries (ssmax's s log n, lssa's log_base n): the kernels run on
  // q'_hi = f[h * q_scale_h_stride + i] q_hi (one fp32 product), forward and backward, and dq is
  // the gradient of q' (Ops::rope_backward takes the same scale to make it q's). One view, q in the
  // compact layout. The CUDA backend applies it in its bf16 operand cast, with no pass and no
  // buffer of its own; the CPU one scales a copy of q.
  const float* q_scale = nullptr;
  int q_scale_h_stride = 0;
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
  // block's key tiles, less the tiles every warp skipped, summed over the blocks).
  long long* entmax_threshold_tiles = nullptr;
  bool no_skip = false;  // disable tile skipping (tests compare against it)
  // CUDA forward: query rows per block and keys per streamed tile, 64 or 128 each (0: the
  // backend's setting, AttentionImplRequest; attn_forward_shape below says which calls can take
  // which). A shape, not a result: the outputs are the same bits at every shape, but for the
  // online-max kinds at 128 keys (their running max moves per tile: within rounding;
  // tests/test_cuda_attention_shapes.cpp).
  int fwd_block_rows = 0;
  int fwd_block_keys = 0;
  // CUDA backward: FlashAttention-2's single kernel, dq and the row gradients (drow_tau,
  // drow_lambda) summed by fp32 atomics in an order that varies from run to run (false: the
  // deterministic split, dq in its own kernel; AttentionImplRequest::deterministic). The CPU
  // backend is always deterministic and ignores it.
  bool atomic_dq = false;
  // CUDA backward: query tiles (Q, dO) in flight per dk/dv block, 1 or 2 (0: the backend's
  // setting, AttentionImplRequest::bwd_stages); attn_backward_stages says which calls take 2. A
  // schedule, not a result: the gradients are the same bits at both.
  int bwd_stages = 0;
  // Forward only: rows i < q_start are skipped (out/out2 rows written as 0, stats and
  // survivors untouched); row i >= q_start is exactly what a full forward computes for it.
  // KV-cache decoding (model/generator.h) computes only the new rows. Backward requires 0.
  int q_start = 0;
  // Optional (dtype bf16, Bf16Matmuls::attention_saved_operands elements): the kernels' bf16
  // copies of q, k, v (q2, k2) kept from a layer's forward to its backward. The forward writes
  // them there; the backward reads them and not q, k, v, which may then be null (the kind keeps
  // no fp32 copy). Null: each call casts q, k, v itself.
  uint16_t* saved = nullptr;
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
};

// The block shape our CUDA forward runs a call with, query rows x keys per streamed tile
// (docs/cuda.md): 128 x 64 (each warp 32 rows) where a.fwd_block_rows asks for 128 and the call
// allows it (one view); else 64 x 128 where a.fwd_block_keys asks for 128 keys and the call allows
// it (one accumulator: not diff softmax); else 64 x 64. Both need head dims <= 64 and no survivor
// or tile counts (those are defined on 64 x 64 tiles, the CPU's); 128 x 128 is not built (its
// 32 x 128 score tile per warp would not fit in registers next to the rest).
struct AttnFwdShape {
  int rows = 64, keys = 64;
};
inline AttnFwdShape attn_forward_shape(const AttnArgs& a) {
  const bool fits = a.Dqk <= 64 && a.Dv <= 64 && !a.survivors && !a.tiles_total && !a.tiles_skipped;
  if (fits && a.fwd_block_rows == 128 && !attn_two_views(a.math)) return {128, 64};
  if (fits && a.fwd_block_keys == 128 && a.math != AttnMath::kDiffSoftmax) return {64, 128};
  return {};
}

// Whether our CUDA backward runs a call as FlashAttention-2's single kernel (dq by atomics): where
// a.atomic_dq asks for it and that kernel fits in the registers: head dims <= 64 (the d12 configs'
// 64 but the Diff kinds' Dv 128; their instances spilled 4-176 bytes, docs/cuda.md), and entmax
// at alpha 1.5 only (compiled for it: any alpha spilled); else the deterministic two kernels.
inline bool attn_backward_atomic(const AttnArgs& a) {
  return a.atomic_dq && a.Dqk <= 64 && a.Dv <= 64 &&
         (a.math != AttnMath::kEntmax || a.entmax_alpha == 1.5f);
}

// The backward our CUDA kernels run a call with: FlashAttention-2's single kernel with dq by
// atomics (AttnArgs::atomic_dq) or the two deterministic ones, and the query tiles in flight.
struct AttnBwdShape {
  bool atomic = false;
  int stages = 1;
};

// How many query tiles our CUDA backward's dk/dv kernel keeps in flight (FlashAttention-2's
// double buffer: tile i + 1 copied while tile i is computed): 2 where a.bwd_stages asks for it and
// the head dims are <= 64 (the d12 bucket, where the tuned shapes are built), else 1. Entmax's
// single kernel keeps 1 (with 2 it spilled 4 bytes on sm_90; its two kernels take 2).
inline int attn_backward_stages(const AttnArgs& a) {
  const bool entmax_atomic = a.math == AttnMath::kEntmax && attn_backward_atomic(a);
  return a.bwd_stages == 2 && a.Dqk <= 64 && a.Dv <= 64 && !entmax_atomic ? 2 : 1;
}

// A query row scale (AttnArgs::q_scale) is served for one view with q in the compact layout.
inline bool attn_q_scale_ok(const AttnArgs& a) {
  return !a.q_scale || (!attn_two_views(a.math) &&
                        (a.qk_bh_stride == 0 || a.qk_bh_stride == size_t(a.T) * size_t(a.Dqk)));
}
constexpr const char* kAttnQScaleError =
    "attention: a query row scale needs one view and q in the compact layout";

// Every pointer member of AttnArgs, for the emulator's strict mode, which checks that each one a
// kernel receives is device memory (docs/emulator.md); a member missing here is reported there.
template <class F>
void device_pointers(const AttnArgs& a, F&& f) {
  f(a.q, "q");
  f(a.q_scale, "q_scale");
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
  f(a.saved, "saved");
  f(a.dout, "dout");
  f(a.dq, "dq");
  f(a.dk, "dk");
  f(a.dv, "dv");
  f(a.dq2, "dq2");
  f(a.dk2, "dk2");
  f(a.drow_tau, "drow_tau");
  f(a.drow_lambda, "drow_lambda");
}

// attention.impl (core/config.h): which implementation the attention calls take.
//   "own"    our kernels, every kind
//   "cudnn"  a vendor's fused softmax attention (cuDNN) for every call its math allows, held to
//            our kernels by a self-check at its first use (backend/cuda/attention_vendor.h);
//            refused at start-up where this backend or build has none, or the kind's math is not
//            softmax attention
//   "auto"   "cudnn" where it can run, else "own"
struct AttentionImplRequest {
  std::string impl = "auto";
  bool strict = false;  // a failed self-check stops the run (tda::Error) instead of falling back
  std::string kind;     // the attention kind, for messages
  AttnMath math = AttnMath::kSoftmax;
  // attention.fwd_block_rows: our forward kernels' query rows per block (0: default, 64; or 128)
  int fwd_block_rows = 0;
  // attention.deterministic: false lets our CUDA backward add dq by atomics (AttnArgs::atomic_dq)
  bool deterministic = true;
  // attention.tuning (backend/attention_tuning.h): "none", "auto" (the committed table of this
  // GPU's arch where there is one) or a table's path
  std::string tuning = "none";
  // attention.fwd_block_keys: our forward kernels' keys per streamed tile (0: default, 64; or 128)
  int fwd_block_keys = 0;
  // attention.bwd_stages: our backward's query tiles in flight (0: default, 1; or 2)
  int bwd_stages = 0;
};

class Ops {
 public:
  virtual ~Ops() = default;
  virtual const char* name() const = 0;

  // The numeric ops, each with its math: backend/ops.def.
#define TDA_OP(ret, fn, params, args) virtual ret fn params = 0;
#define TDA_OP_COMPOSED(ret, fn, params, args) virtual ret fn params;
#include "backend/ops.def"

  // Memory of this backend. Every buffer the ops above read or write comes from alloc_bytes()
  // (through DeviceArray, backend/device_array.h). Host code may dereference such a buffer only
  // when host_memory() is true; otherwise it moves data with upload/download. The defaults are
  // host memory (the CPU backend); the CUDA backend overrides them with device memory.
  virtual bool host_memory() const {
    return true;
  }
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
  virtual Bf16Matmuls* bf16_matmuls() {
    return nullptr;
  }
  // The machine these ops run on, for measurements (backend/device.h): the host by default. A
  // process-wide object: it outlives every Ops.
  virtual Device& device();
  // Chooses the attention implementation (AttentionImplRequest above) and returns the start-up
  // line that says which runs; throws tda::Error when the request cannot be honoured. The
  // default (CPU): our kernels, "cudnn" refused.
  virtual std::string set_attention_impl(const AttentionImplRequest& r);
};

}  // namespace tda
