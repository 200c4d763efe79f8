// The attention seam. A variant owns everything between the block's fused input projection
// (c_attn: x -> proj, width proj_width()) and the output projection (c_proj): RoPE, any
// normalisation of q/k, the streaming kernel, gates and output norms, and its own learnable
// tensors. The model knows nothing mechanism-specific.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "core/config.h"

namespace tda {

class Bf16Matmuls;
struct Rng;

struct ParamSpec {
  enum class Init { kNormal, kZeros, kOnes, kConst, kUniform };
  std::string name;  // suffix under transformer.h.<l>.attn.
  std::vector<int64_t> shape;
  Init init = Init::kNormal;
  float a = 0.02f;     // std (normal), value (const), half-width (uniform)
  bool decay = false;  // weight decay: matrices yes, scalars/vectors/gains no
};

// Fills p[0..n) as `spec` says (normal: std a; const: a; uniform: U(-a, a)). The model and the
// benchmarks initialise every tensor through this one function.
void init_param(float* p, size_t n, ParamSpec::Init init, float a, Rng& rng);

struct AttnContext {
  Ops& ops;
  int B, T;
  int layer, n_layer;
  long step;         // optimizer step (some variants anneal with it)
  const float* cos;  // RoPE tables (T_max, head_dim/2)
  const float* sin;
  int pos0;  // absolute position of the first token (RoPE offset)
  // Forward only (KV-cache decoding, model/generator.h): query rows i < q_start are not
  // computed by the attention kernel (their outputs are zero); rows >= q_start see every key
  // j <= i, so they equal a full forward. Backward requires q_start == 0.
  int q_start = 0;
  // Forward: the layer's backward scratch (scratch_floats(B, T)), free until the backward, for a
  // kind that computes q, k, v there instead of saving them (save_bf16_operands). GPT2 and the
  // generator set it; null elsewhere (such a kind then refuses to run).
  float* scratch = nullptr;
};

// What the tests and tools may assume of a kind, and the tolerances of its checks against the
// references (docs/attention.md, "Tests"). Each kind states them in its own file; suites read them
// from here instead of switching on kind names, so a new kind is tested without being listed.
struct AttentionTraits {
  bool normalised = false;  // every row of every view's weights sums to 1
  bool dense = false;       // every causal weight > 0: sparsity and dead rows are exactly 0
  // Per view, the proj columns (q0, k0) where its q block [q0, k0) starts and its k block of the
  // same width follows. Tying q_0 = -k_0 at token 0 makes s_00 < 0, which empties row 0 of a
  // rectifier (o_0 = 0, so y_0 = 0 exactly); empty for kinds whose rows are never empty.
  std::vector<std::pair<int, int>> empty_row_qk;
  int head_multiple = 1;  // model.n_head must be a multiple of it (the Diff kinds pair heads)
  double fd_step = 1e-3;  // finite-difference step; a kinked weight (p = 1 rectifier) takes 1e-4
  // Emulated CUDA backend vs the CPU backend, relative 2-norm error, fp32: y and gradients.
  double cuda_y = 2e-2, cuda_grad = 2e-2;
  // |CUDA / CPU gradient norm - 1| after step 1 of training, fp32 (bf16 loosens it to >= 0.1).
  double step1_grad_norm = 2e-2;
};

// The traits that follow from a kernel math at a power (ops.h): normalised maths (softmax,
// entmax, softplus) sum to 1; softmax's exp weights are dense; rectifiers at power 1 have a kink
// at their threshold, where a bf16- or order-sized change of a score moves a derivative by a
// step, so their steps and bounds are looser; thresholds at power >= 2 sit between.
AttentionTraits traits_of_math(AttnMath m, int power);

class AttentionVariant {
 public:
  virtual ~AttentionVariant() = default;
  virtual std::string kind() const = 0;
  // The kernel math its forward runs (backend/ops.h); `tda bench` drives the kind through it.
  virtual AttnMath math() const = 0;
  // Defaults to traits_of_math(math(), 1); a kind adds its empty-row columns or other powers.
  virtual AttentionTraits traits() const { return traits_of_math(math(), 1); }
  // Rows of the fused c_attn weight (e.g. 3*d_model for q|k|v).
  virtual int proj_width() const = 0;
  // Extra learnable tensors of one layer, created and saved with the model.
  virtual std::vector<ParamSpec> extra_params(int layer) const {
    (void)layer;
    return {};
  }
  // Floats saved per layer between forward and backward, and backward scratch (shared).
  virtual size_t act_floats(int B, int T) const = 0;
  // dtype bf16 (GPT2, before it sizes the activations): a kind may keep its attention kernel's
  // bf16 copies of q, k, v from forward to backward (AttnArgs::saved, sized by the backend)
  // instead of its fp32 q, k, v, which its forward then computes in AttnContext::scratch. Returns
  // whether it does; act_floats() counts the copies from then on. Default: no.
  virtual bool save_bf16_operands(const Bf16Matmuls&) { return false; }
  virtual size_t scratch_floats(int B, int T) const = 0;
  // proj (B*T, proj_width) -> y (B*T, d_model). `extra` are this layer's extra tensors in the
  // order of extra_params().
  virtual void forward(const AttnContext& c, const float* proj, float* y, float* act,
                       const std::vector<float*>& extra) = 0;
  // dy (B*T, d_model) -> dproj (B*T, proj_width) overwritten; dextra accumulated (+=).
  // `proj` is this layer's forward input only when backward_reads_proj(); otherwise the model
  // keeps one layer's proj, not every layer's, and passes whatever it holds.
  virtual bool backward_reads_proj() const { return false; }
  virtual void backward(const AttnContext& c, const float* proj, const float* dy, float* dproj,
                        float* act, const std::vector<float*>& extra,
                        const std::vector<float*>& dextra, float* scratch) = 0;
};

std::unique_ptr<AttentionVariant> make_attention(const ModelConfig& m, const AttentionConfig& a);
std::vector<std::string> attention_kinds();

}  // namespace tda
