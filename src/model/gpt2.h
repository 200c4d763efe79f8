// GPT-2 as in the TDA paper: token embedding, pre-norm blocks (RMSNorm -> attention -> residual,
// RMSNorm -> GELU MLP -> residual), RoPE inside attention, final RMSNorm, untied LM head over a
// vocabulary padded to a multiple of 128 (padded logits never enter the loss). No biases.
//
// All parameters live in one contiguous buffer (as llm.c): the optimizer, grad norm, all-reduce
// and checkpoints see one array. Tensor names are those of the HF export (docs/checkpoints.md).
// Every tensor starts on a kParamAlign-float (256-byte) boundary of that buffer, so a GEMM
// operand (fp32 master or its bf16 copy) is 16-byte aligned for vector loads and cuBLASLt
// whatever the odd-sized tensors before it (TDA's lambda, ssmax's s/b). The gaps are zero in
// the parameters, gradients and moments and belong to no tensor: AdamW, weight decay and
// checkpoints work per tensor, and zeros add nothing to the gradient norm or the all-reduce.
//
// Mixed precision (dtype "bf16"): the backend keeps a bf16 copy of the master weights for its
// GEMMs (backend/mixed_precision.h). The model is the only writer of the master weights and
// refreshes that copy after every write (init_weights, params_from_host, update_params), so no
// caller can forget it; params() is read-only.
//
// Every buffer lives in the backend's memory (Ops::alloc_bytes): parameters, gradients and RoPE
// tables from the constructor, activations, scratch and token buffers in one arena allocated by
// set_batch. Host data crosses only by upload (weights at init/load, tokens per forward) and
// download (per-token losses, logits, weights for checkpoints), so on the CUDA backend params()
// and grads() are device pointers that only Ops methods may dereference.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "attention/variant.h"
#include "backend/device_array.h"
#include "backend/memory_check.h"
#include "backend/mixed_precision.h"
#include "backend/ops.h"
#include "backend/slots.h"
#include "core/config.h"

namespace tda {

struct ParamTensor {
  std::string name;
  std::vector<int64_t> shape;
  size_t offset = 0, numel = 0;
  ParamSpec::Init init = ParamSpec::Init::kNormal;
  float init_a = 0.02f;
  bool decay = false;
};

class GPT2 {
 public:
  static constexpr size_t kParamAlign = 64;  // floats: 256 bytes

  // dtype "fp32", or "bf16" (bf16 GEMM inputs over fp32 master weights; the backend must have
  // the capability: a one-line error otherwise).
  GPT2(const ModelConfig& m, const AttentionConfig& a, Ops& ops, const std::string& dtype = "fp32");
  ~GPT2();
  GPT2(const GPT2&) = delete;
  GPT2& operator=(const GPT2&) = delete;

  // scheme "gpt2": N(0, 0.02); residual output projections N(0, 0.02/sqrt(2 n_layer)).
  // "pytorch": what torch.nn's modules start from: the token embedding N(0, 1), every matrix
  // U(+-1/sqrt(fan_in)). Both: norm gains 1; attention extras other than matrices as their
  // variant declares. Deterministic in `seed`.
  void init_weights(uint64_t seed, const std::string& scheme = "gpt2");

  // The tensors of a model of this config, in buffer order with their offsets (what the
  // constructor lays out), without allocating anything.
  static std::vector<ParamTensor> layout(const ModelConfig& m, const AttentionConfig& a);

  // Sizes activations for micro-batches of B x T (T <= seq_len). Allocates once; no allocation
  // happens in forward/backward afterwards. An arena that cannot fit is refused before it is
  // allocated (backend/memory_check.h), naming B and T.
  void set_batch(int B, int T);
  // train.recompute (0, 1, 2; core/config.h): which activations the backward recomputes instead
  // of keeping one per layer. Takes effect at the next set_batch.
  void set_recompute(int level);
  int recompute() const { return recompute_; }
  // Bytes of the activation arena (set_batch's one allocation).
  size_t activation_bytes() const { return arena_.size() * sizeof(float); }
  // What set_batch(B, T) allocates (the arena, token buffers, host copies of tokens and losses).
  MemoryNeed batch_memory(int B, int T) const;
  // What the constructor of a model of this config allocates (parameters, gradients, the bf16
  // copy, RoPE tables), without building one: checked before a checkpoint's model is built.
  static MemoryNeed memory_need(const ModelConfig& m, const AttentionConfig& a,
                                const std::string& dtype);
  // flat_size() of a model of this config, without building one.
  static size_t flat_floats(const ModelConfig& m, const AttentionConfig& a);

  // Mean loss over the B*T targets that count (kIgnoreTarget, backend/ops.h, does not; 0 when
  // none counts). With `train`, also computes the LM head's gradients with d(loss)/d(logit)
  // scaled by grad_scale (so micro-batches accumulate to a mean), leaving the rest of the
  // backward to backward().
  double forward(const int32_t* inputs, const int32_t* targets, bool train, float grad_scale);
  // The last forward()'s loss summed over its counted targets, and their number: a mean over
  // several micro-batches or ranks is the sum of the sums over the sum of the counts.
  double loss_sum() const { return loss_sum_; }
  long counted_targets() const { return counted_; }
  void backward();
  // Per-token cross-entropy (B*T, natural log) of the last forward() with targets; row b*T + t
  // is -log p(targets[b,t] | inputs[b, 0..t]). Host memory (downloaded by forward()).
  const float* token_losses() const { return losses_host_.data(); }
  // Host logits (V_padded) at the last of T positions of `inputs` (host, T tokens).
  void forward_logits(const int32_t* inputs, int T, float* logits);
  // Host logits (V_padded each) at the given rows (b*T + t) of a batch of the set_batch shape,
  // from one forward over `inputs` (host, B*T tokens): the answers of a whole batch at once.
  void logits_at(const int32_t* inputs, const std::vector<int>& rows, float* logits);

  void zero_grad();
  // The flat parameter / gradient buffers in the backend's memory (device pointers on CUDA),
  // flat_size() floats each, alignment gaps included. Parameters are read-only here: writes go
  // through params_from_host() or update_params().
  const float* params() const { return params_.data(); }
  float* grads() { return grads_.data(); }
  size_t flat_size() const { return params_.size(); }
  size_t param_count() const;  // learnable parameters (sum of the tensors' numel), no gaps
  const std::string& dtype() const { return dtype_; }
  // Host copies of the parameters (checkpoints, export), and the way back (flat_size() floats).
  std::vector<float> params_to_host() const { return params_.to_host(); }
  void params_from_host(const float* host);
  // An in-place write of the master weights on the backend (the optimizer step, a
  // communicator's broadcast or all-gather): write(p) gets the flat buffer, then the backend's
  // low-precision copy is refreshed.
  template <class F>
  void update_params(F&& write) {
    write(params_.data());
    params_written();
  }
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  const ParamTensor& tensor(const std::string& name) const;
  const ModelConfig& config() const { return m_; }
  const AttentionVariant& attention() const { return *attn_; }
  AttentionVariant& attention() { return *attn_; }
  void set_step(long step) { step_ = step; }  // for variants that anneal with training
  long step() const { return step_; }
  Ops& ops() const { return ops_; }
  // FLOPs of one training step per token (forward + backward), counted in docs/perf.md.
  double train_flops_per_token(int T) const;

 private:
  struct Layer {
    size_t ln1, c_attn, c_proj, ln2, c_fc, mlp_proj;  // offsets into params_/grads_
    std::vector<size_t> extra;
  };
  static std::vector<ParamTensor> layout(const ModelConfig& m, const AttentionVariant& attn);
  SlotTable<GPT2> arena_slots(int B, int T) const;  // the activation arena of a B x T batch
  size_t token_ints(int B, int T) const;            // inputs, targets, embedding plan
  // Layer l's slices of the activation arena, saved by forward for backward. ln1, ln2 (rows, C),
  // atty (the attention output, c_proj's input: rows, C) and fc (the MLP's pre-activation), fcg
  // (its GELU) (rows, 4C) are fp32, or bf16 elements when dtype is bf16 (stored_floats). y is
  // where the attention writes its fp32 output: atty itself under fp32; under bf16 a buffer
  // that block_forward then rounds into atty.
  struct Acts {
    float *x, *ln1, *rstd1, *proj, *attn, *y, *atty, *xmid, *ln2, *rstd2, *fc, *fcg;
  };
  Acts acts(int l) const;
  void check_tokens(const int32_t* tokens, int limit, const char* what,
                    bool allow_ignore = false) const;
  void forward_trunk();  // from the inputs in tokens_
  // Block l (pre-norm: x + attention(RMSNorm x), then + MLP(RMSNorm .)) on `rows` token rows,
  // a.x -> xout (which may be a.x). a.proj and a.y span the attention's ctx.T rows, this
  // call's being [row0, row0 + rows); the other buffers hold this call's rows only. Training
  // runs all B*T rows (row0 0); the decoder (generator.h) the new rows of one sequence whose
  // earlier rows' proj it keeps.
  void block_forward(int l, const AttnContext& ctx, int rows, int row0, const Acts& a, float* xout);
  std::vector<float*> extras(float* base, const Layer& L);
  void params_written();  // refreshes the backend's bf16 copy (dtype bf16)
  // Layers whose c_attn output the arena keeps: all when the attention's backward reads it,
  // else one (every layer's forward overwrites it).
  size_t proj_layers() const { return attn_->backward_reads_proj() ? size_t(m_.n_layer) : 1; }
  // The activations that are only GEMM inputs (ln1, atty, ln2, fc, fcg) are stored in bf16 under
  // dtype bf16 (backend/mixed_precision.h). Floats that `elements` of them take: half then,
  // rounded up to 16 bytes so that each layer's slice stays aligned for cuBLASLt.
  size_t stored_floats(size_t elements) const { return bf16_ ? (elements + 7) / 8 * 4 : elements; }
  // The ops on them, by dtype.
  void norm_forward(float* y, float* rstd, const float* x, const float* w, int rows);
  // y = x W^T, plus r (the residual stream the layer writes into) unless r is null.
  void stored_matmul_forward(float* y, const float* x, const float* W, int N, int C, int OC,
                             const float* r = nullptr);
  void stored_matmul_backward(float* dx, float* dW, const float* dy, const float* x, const float* W,
                              int N, int C, int OC);
  // dres_ += the dx of a norm's backward (x its input, w its weight); under dtype bf16 the sum is
  // also written to dres16_ in bf16, the dy the next backward GEMMs (mlp_proj, c_proj) read.
  void residual_norm_backward(float* dw, const float* dy, const float* x, const float* w,
                              const float* rstd);

  // The decoder runs the model's layers on its own buffers: it reads the weights in place.
  friend class Generator;

  ModelConfig m_;
  Ops& ops_;
  std::string dtype_;
  Bf16Matmuls* bf16_ = nullptr;  // the backend's capability, dtype bf16 only
  std::unique_ptr<AttentionVariant> attn_;
  std::vector<ParamTensor> tensors_;
  size_t wte_ = 0, lnf_ = 0, lm_head_ = 0;
  std::vector<Layer> layers_;
  DeviceArray<float> params_, grads_;
  DeviceArray<float> rope_cos_, rope_sin_;
  long step_ = 0;

  // Activations for the current (B, T): pointers carved from one arena, which grows only when a
  // shape needs more than it holds (so sampling at B = 1 after training allocates nothing).
  int B_ = 0, T_ = 0;
  DeviceArray<float> arena_;
  // inputs (N), targets (N) and the embedding backward's plan (backend/embedding_plan.h), one
  // upload per micro-step from tokens_host_ (docs/perf.md: host syncs).
  DeviceArray<int32_t> tokens_;
  std::vector<int32_t> tokens_host_;
  int32_t *inputs_ = nullptr, *targets_ = nullptr, *plan_ = nullptr;
  float* resid_ = nullptr;  // (L+1, N, C): input of each block, then the final stream
  float *ln1_ = nullptr, *rstd1_ = nullptr, *proj_ = nullptr, *attn_act_ = nullptr;
  float *atty_ = nullptr, *xmid_ = nullptr, *ln2_ = nullptr, *rstd2_ = nullptr, *fc_ = nullptr;
  float *fcg_ = nullptr, *lnf_out_ = nullptr, *rstdf_ = nullptr, *losses_ = nullptr;
  float *dlnf_ = nullptr, *dres_ = nullptr, *dproj_ = nullptr, *dbuf_ = nullptr;
  float *dfc_ = nullptr, *attn_scratch_ = nullptr, *logits_ = nullptr;
  float* attn_y_ = nullptr;  // dtype bf16: the current layer's fp32 attention output (Acts::y)
  int recompute_ = 0;  // train.recompute: 1 one GELU buffer for all layers, 2 also one per norm
  float* dres16_ = nullptr;  // dtype bf16: dres_ in bf16 elements (residual_norm_backward)
  std::vector<float> losses_host_;
  double loss_sum_ = 0.0;  // of the last forward() (loss_sum())
  long counted_ = 0;
};

}  // namespace tda
