// Optional backend capability: bf16 matmul inputs with fp32 master weights (dtype "bf16").
// A backend that has it (CudaOps) returns itself from Ops::bf16_matmuls(); CpuOps returns null,
// and the model then refuses bf16 with a one-line error.
//
// After enable_bf16_matmuls(master, n), the matmul methods (matmul_forward/backward and the
// fused GELU pair matmul_gelu_forward/matmul_backward_dgelu) and the LM head round their GEMM
// inputs to bf16 and accumulate and write fp32 (GELU and its aux stay fp32). A weight operand
// inside the flat fp32 master buffer [master, master + n) is read from the backend's bf16 copy
// of it, which weights_changed() refreshes.
//
// Who calls these: GPT2 only (model/gpt2.h). A GPT2 built with dtype "bf16" registers its
// parameter buffer, calls weights_changed() after each of its writes to it (init_weights,
// params_from_host, update_params) and disables the path when destroyed; its params() is
// read-only, so a trainer, loader or communicator cannot change the master weights without the
// refresh. One master buffer per backend: one bf16 model per Ops.
//
// bf16 storage of the activations that are only GEMM inputs: the RMSNorm outputs (c_attn's
// and c_fc's input, N*C each), the attention output (c_proj's input, N*C) and the GELU MLP's
// pre-activation and output ((N, 4C) each), 11 of a d12 layer's ~19 N*C saved floats. The *_bf16
// methods take them as bf16 elements (uint16_t bits, so that this header needs no CUDA type).
// GPT2 calls them instead of rmsnorm_forward and the fp32 matmuls of its MLP, c_attn and c_proj
// when its dtype is bf16. The residual stream's gradient, the dy of the mlp_proj and c_proj
// backward GEMMs, is written in bf16 too, beside its fp32 sum, by the norms' backward that
// produce it (rmsnorm_backward_bf16), and so is the MLP's pre-activation gradient, c_fc's dy,
// by the GELU backward (matmul_backward_dgelu_bf16), instead of fp32 alone. Each value is rounded
// once, where it is written, as the GEMM input cast would round it: results equal those of
// casting at every GEMM, bit for bit.
#pragma once
#include <cstddef>
#include <cstdint>

namespace tda {

struct AttnArgs;
// The attention kernels' bf16 operand copies, in their order in AttnArgs::saved.
enum class AttnOperand { kQ, kK, kV, kQ2, kK2 };

class Bf16Matmuls {
 public:
  virtual ~Bf16Matmuls() = default;
  virtual void enable_bf16_matmuls(const float* master, size_t n) = 0;
  virtual void weights_changed() = 0;
  // Back to fp32 matmuls, the master buffer forgotten (its owner is going away: memory at those
  // addresses must not be read through the stale copy later).
  virtual void disable_bf16_matmuls() = 0;

  // y(N,C) = bf16(w x rstd), rstd(N) fp32: Ops::rmsnorm_forward with its output rounded.
  virtual void rmsnorm_forward_bf16(uint16_t* y, float* rstd, const float* x, const float* w, int N,
                                    int C, float eps) = 0;
  // y[i] = bf16(x[i]), round to nearest even: the rounding an fp32 GEMM input gets, done once
  // where the input is stored (the attention's output, written in fp32 by every kind).
  virtual void store_bf16(uint16_t* y, const float* x, size_t n) = 0;
  // y(N,OC) = x(N,C) W^T with x stored in bf16 (no cast: it is a GEMM input as it is), plus
  // r(N,OC) unless r is null (Ops::matmul_residual_forward: the residual added in the GEMM).
  virtual void matmul_forward_bf16(float* y, const uint16_t* x, const float* W, int N, int C,
                                   int OC, const float* r) = 0;
  // Ops::matmul_backward with x stored in bf16: dx = dy W, dW += dy^T x.
  virtual void matmul_backward_bf16(float* dx, float* dW, const float* dy, const uint16_t* x,
                                    const float* W, int N, int C, int OC, bool accumulate_dx) = 0;
  // The same with dy stored in bf16 as well; dx overwritten.
  virtual void matmul_backward_bf16_dy(float* dx, float* dW, const uint16_t* dy, const uint16_t* x,
                                       const float* W, int N, int C, int OC) = 0;
  // Ops::rmsnorm_backward (dx += ..., dw += ...) that also writes dx16 = bf16(dx), after the sum.
  virtual void rmsnorm_backward_bf16(float* dx, uint16_t* dx16, float* dw, const float* dy,
                                     const float* x, const float* w, const float* rstd, int N,
                                     int C) = 0;
  // pre(N,OC) = bf16(x(N,C) W(OC,C)^T) (fp32 sum, one rounding); y = bf16(gelu(pre)), the GELU
  // of the stored (rounded) pre-activation.
  virtual void matmul_gelu_forward_bf16(uint16_t* y, uint16_t* pre, const uint16_t* x,
                                        const float* W, int N, int C, int OC) = 0;
  // y = bf16(gelu(pre)) over n elements: matmul_gelu_forward_bf16's GELU alone, the same bits
  // (train.recompute: the backward recomputes the GELU from the stored pre-activation).
  virtual void gelu_forward_bf16(uint16_t* y, const uint16_t* pre, size_t n) = 0;
  // dpre16(N,C) = bf16((dy(N,OC) W(OC,C)) * gelu'(pre)); dW(OC,C) += dy^T x (skipped when dW
  // is null); x = gelu(pre) and pre as matmul_gelu_forward_bf16 stored them, dy in bf16. `prod`
  // (N,C) fp32 is scratch for the product dy W. dpre is the dy of c_fc's backward GEMMs
  // (matmul_backward_bf16_dy), rounded once as the fp32 dpre's cast at their input rounded it.
  virtual void matmul_backward_dgelu_bf16(uint16_t* dpre16, float* prod, float* dW,
                                          const uint16_t* dy, const uint16_t* x, const float* W,
                                          const uint16_t* pre, int N, int C, int OC) = 0;
  // The bf16 elements AttnArgs::saved needs for a's shape: the attention kernels' operand copies
  // of q, k, v (q2, k2), which a kind may keep from its forward to its backward in place of its
  // fp32 q, k, v (under dtype bf16, every kind whose backward reads q, k, v only through the
  // kernel: AttentionVariant::save_bf16_operands); the backward then casts only dO.
  virtual size_t attention_saved_operands(const AttnArgs& a) const = 0;
  // Ops::l2norm_backward (dx = (dx~ - x~ (x~.dx~)) / |x|, in place, a.B a.H a.T rows of a.Dqk)
  // with x~ read from its copy in a.saved (which: q, k, q2 or k2, as the forward of a cast
  // them) instead of fp32: what lets tra and tda keep the copies alone. x~ is the rounded one,
  // the operand the kernel's scores used (a relative 2^-9 per element against the fp32 x~).
  virtual void l2norm_backward_saved(float* dx, const AttnArgs& a, AttnOperand which,
                                     const float* norm) = 0;
  // Ops::row_dot (out[n] = a_n . b_n, N rows of D) with a stored in bf16: ssmax's unscaled q,
  // kept for its scalar gradients beside the kernel's copy of the scaled one.
  virtual void row_dot_bf16(float* out, const uint16_t* a, const float* b, size_t N, int D) = 0;
};

}  // namespace tda
