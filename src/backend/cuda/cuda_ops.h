// CUDA backend: every Ops method on device pointers. Kernels live in kernels/*.cu (one file per
// op family, the formula next to the kernel), matmuls go through tda::cuda::gemm (common.h).
// fp32 storage and fp32 accumulation everywhere except the bf16 MLP (mixed_precision.h);
// every reduction runs in a fixed order (no float atomics), so results are deterministic.
//
// The same sources run on the CPU under the SIMT emulator (docs/emulator.md), where device
// pointers are host pointers; the tests compare every method with CpuOps there.
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/cuda/attention_vendor.h"
#include "backend/mixed_precision.h"
#include "backend/ops.h"

struct __nv_bfloat16;  // cuda_bf16.h (also what the emulated build uses)

namespace tda {

namespace cuda {
enum class Epilogue;  // common.h

// Host wrappers of the kernels (each launches on the backend stream and throws tda::Error on a
// launch error). Scratch arguments are device buffers of the size the *_scratch() helper names.
void gelu_forward(float* y, const float* x, size_t n);
void gelu_backward(float* dx, const float* x, const float* dy, size_t n);
// The same on bf16 storage (the bf16 MLP, mixed_precision.h): y = bf16(gelu(x)) and
// dx = bf16(gelu'(x) dy) with x in bf16, dy fp32.
void gelu_forward(__nv_bfloat16* y, const __nv_bfloat16* x, size_t n);
void gelu_backward(__nv_bfloat16* dx, const __nv_bfloat16* x, const float* dy, size_t n);
void add(float* y, const float* a, const float* b, size_t n);
void add_inplace(float* y, const float* a, size_t n);
void scale(float* x, size_t n, float s);
void axpby(float* y, float a, const float* x, float b, size_t n, const float* s = nullptr);
void zero(float* x, size_t n);

void rmsnorm_forward(float* y, float* rstd, const float* x, const float* w, int N, int C,
                     float eps);
// y = bf16(w x rstd): the bf16 path's stored GEMM input (mixed_precision.h).
void rmsnorm_forward(__nv_bfloat16* y, float* rstd, const float* x, const float* w, int N, int C,
                     float eps);
constexpr int kRmsnormDwRows = 32;
size_t rmsnorm_backward_scratch(int N, int C, int chunk_rows = kRmsnormDwRows);  // floats
// dx += ..., dw += the sum over chunks of chunk_rows rows of each chunk's partial, both sums in
// order; dx must not overlap dy or x. dx16, when given, receives bf16(dx) after the accumulation
// (the bf16 path's residual gradient). Tests pass a small chunk_rows to reach many chunks at an
// emulated size.
void rmsnorm_backward(float* dx, float* dw, const float* dy, const float* x, const float* w,
                      const float* rstd, int N, int C, float* scratch,
                      __nv_bfloat16* dx16 = nullptr, int chunk_rows = kRmsnormDwRows);

void embedding_forward(float* y, const int32_t* tokens, const float* wte, int N, int C);
// plan: embedding_plan() of the tokens (backend/embedding_plan.h), device memory. One block per
// distinct token, at most max_blocks (then each takes every max_blocks-th; tests pass a few).
void embedding_backward(float* dwte, const float* dy, const int32_t* plan, int N, int C,
                        int max_blocks = 8192);

void rope_forward(float* out, const float* x, int row, int col0, const float* cos, const float* sin,
                  int B, int T, int H, int D, int pos0);
void rope_backward(float* dx, const float* dout, int row, int col0, const float* cos,
                   const float* sin, int B, int T, int H, int D, int pos0,
                   const float* row_scale = nullptr, int scale_h_stride = 0);
void split_heads(float* out, const float* x, int row, int col0, int B, int T, int H, int D);
void merge_heads(float* x, const float* in, int row, int col0, int B, int T, int H, int D);

// Attention variants' pre/post pieces (kernels/variant_ops.cu; ops.h documents them).
void l2norm_forward(float* x, float* norm, size_t N, int D);
void l2norm_backward(float* dx, const float* xhat, const float* norm, size_t N, int D);
// The same with x~ in bf16, its rows ld elements apart (an attention operand copy).
void l2norm_backward(float* dx, const __nv_bfloat16* xhat, int ld, const float* norm, size_t N,
                     int D);
void row_dot(float* out, const float* a, const float* b, size_t N, int D);
void row_dot(float* out, const __nv_bfloat16* a, const float* b, size_t N, int D);
// head_row_sum over many blocks: chunks of >= items_per_block (b, t) items per head, then the
// chunks in order; scratch: head_row_sum_scratch() doubles. Tests pass a small items_per_block.
constexpr int kHeadRowSumItems = 4096;
size_t head_row_sum_scratch(int B, int H, int T, int items_per_block = kHeadRowSumItems);
void head_row_sum(float* dst, const float* x, const float* w, float scale, int B, int H, int T,
                  double* scratch, int items_per_block = kHeadRowSumItems);
void threshold_tau(float* out, const float* beta, float beta_fixed, bool derivative, int T,
                   double kappa, int d);
// The variants' small parameters on the device (kernels/variant_scalars.cu; ops.h documents them).
void clamp_affine(float* out, const float* x, float a, float b, float lo, float hi);
void diff_lambda(float* out, const float* lq1, const float* lk1, const float* lq2, const float* lk2,
                 int d, float init);
void diff_lambda_backward(float* dlq1, float* dlk1, float* dlq2, float* dlk2, const float* lq1,
                          const float* lk1, const float* lq2, const float* lk2, const float* e,
                          const float* dl_sum, int d);
void position_scales(float* f, const float* s, const float* b, float div, int H, int T);
void sigmoid_gate_forward(float* y, const float* o, const float* z, int z_stride, int B, int T,
                          int H, int D, int group);
void sigmoid_gate_backward(float* g, float* dz, int dz_stride, const float* dy, const float* o,
                           const float* z, int z_stride, int B, int T, int H, int D, int group);
void rela_norm_forward(float* y, float* r, float* mu, const float* u, const float* gamma,
                       const float* w, int N, int C, float eps, bool center);
constexpr int kRelaNormChunkRows = 32;
size_t rela_norm_backward_scratch(int N, int C, int chunk_rows = kRelaNormChunkRows);  // floats
void rela_norm_backward(float* du, float* dgamma, float* dw, const float* dy, const float* u,
                        const float* r, const float* mu, const float* gamma, const float* w, int N,
                        int C, bool center, float* scratch);
// Its dgamma/dw stage (dw null: not gated), over chunks of chunk_rows tokens as rmsnorm's dw.
void rela_norm_backward_dparams(float* dgamma, float* dw, const float* dy, const float* u,
                                const float* r, const float* mu, const float* gamma, const float* w,
                                int N, int C, float* scratch, int chunk_rows = kRelaNormChunkRows);

constexpr int kLmHeadChunkRows = 1024;
size_t lm_head_scratch(int N, int V_padded);  // floats: one chunk of logits
// The bf16 path's GEMM operands: x (N, C) and W (V_padded, C) in bf16, and a bf16 buffer of
// lm_head_scratch() elements for one chunk of dlogits.
struct Bf16Operands {
  const __nv_bfloat16* x;
  const __nv_bfloat16* W;
  __nv_bfloat16* dlogits;
};
void lm_head_loss(float* losses, float* dx, float* dW, const float* x, const float* W,
                  const int32_t* targets, int N, int C, int V_padded, int V_real, float grad_scale,
                  float* scratch, const Bf16Operands* bf = nullptr);

void adamw(float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1,
           float beta2, float eps, float wd, int t);
// AdamW on g * grad_scale, then g = 0, in one pass (Ops::adamw_clip_zero).
void adamw_clip_zero(float* p, float* g, float* m, float* v, size_t n, float lr, float beta1,
                     float beta2, float eps, float wd, int t, float grad_scale);

size_t sum_squares_scratch();  // doubles
double sum_squares(const float* x, size_t n, double* scratch);
// out[c] += sum_r in[r ld + c] (rows x C, row stride ld), over many blocks in a fixed order
// (reduce.cu); scratch: column_sum_scratch(rows, C) floats.
size_t column_sum_scratch(int rows, int C);
void column_sum(float* out, const float* in, int rows, int C, size_t ld, float* scratch);

// Causal attention, every AttnMath (src/backend/cuda/attention.cu dispatches to the tensor-core
// kernels/attention_fwd.cu, attention_bwd.cu; entmax adds its row pre-passes).
// tiles_skipped/tiles_total, when set, are device counters (integer atomics). `operands`: device
// scratch of attention_operands_scratch(a, backward) bf16 elements, where the kernels' bf16
// copies of q, k, v (and dO) go; with a.saved, the forward writes q, k, v's there (no scratch)
// and the backward's scratch holds dO's alone. Backward `scratch`: attention_backward_scratch(a)
// floats.
size_t attention_operands_scratch(const AttnArgs& a, bool with_dout);
// Bf16Matmuls::l2norm_backward_saved: l2norm_backward on the copy `which` in a.saved.
void attention_l2norm_backward_saved(float* dx, const AttnArgs& a, AttnOperand which,
                                     const float* norm);
void attention_forward(const AttnArgs& a, uint16_t* operands);
size_t attention_backward_scratch(const AttnArgs& a);
// drop_term: the negative control of cpu_attention_backward (cpu_ops.h); tests only.
void attention_backward(const AttnArgs& a, float* scratch, uint16_t* operands,
                        bool drop_term = false);
// The tiled (policy) kernels behind them, every AttnMath.
void attention_tiled_forward(const AttnArgs& a, uint16_t* operands);
void attention_tiled_backward(const AttnArgs& a, float* scratch, uint16_t* operands,
                              bool drop_term);
}  // namespace cuda

class CudaOps final : public Ops, public Bf16Matmuls {
 public:
  CudaOps() = default;
  ~CudaOps() override;
  CudaOps(const CudaOps&) = delete;
  CudaOps& operator=(const CudaOps&) = delete;

  const char* name() const override { return "cuda"; }
#define TDA_OP(ret, fn, params, args) ret fn params override;
#define TDA_OP_COMPOSED(ret, fn, params, args)
#include "backend/ops.def"
  // cuBLASLt GELU_AUX / DGELU epilogues and the residual addend (common.h), fp32 or bf16 inputs
  // like the matmuls.
  void matmul_gelu_forward(float* y, float* pre, const float* x, const float* W, int N, int C,
                           int OC) override;
  void matmul_residual_forward(float* y, const float* x, const float* W, int N, int C, int OC,
                               const float* r) override;
  void matmul_backward_dgelu(float* dpre, float* dW, const float* dy, const float* x,
                             const float* W, const float* pre, int N, int C, int OC) override;
  // One kernel per tensor (kernels/adamw.cu) where the default composes three.
  void adamw_clip_zero(float* p, float* g, float* m, float* v, size_t n, float lr, float beta1,
                       float beta2, float eps, float wd, int t, float grad_scale) override;

  // Device memory (cudaMalloc / cudaMemcpy): host code must not dereference it.
  bool host_memory() const override {
    return false;
  }
  void* alloc_bytes(size_t bytes, const std::string& what) override;
  void free_bytes(void* p) override;
  void upload(void* dst, const void* host_src, size_t bytes) override;
  void download(void* host_dst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  Device& device() override;  // the GPU (timing.h)
  // attention.impl: our kernels, or cuDNN's where the kind allows (attention_vendor.h).
  std::string set_attention_impl(const AttentionImplRequest& r) override {
    return attention_impl_.set(r);
  }
  const cuda::AttentionImpl& attention_impl() const {
    return attention_impl_;
  }

  // bf16 matmuls: cast kernels (kernels/cast.cu) into bf16 buffers, then the bf16 gemm
  // (cuBLASLt, bf16 in, fp32 accumulate and out). Weights come from one bf16 copy of the master
  // buffer, refreshed by weights_changed(); activations are cast at each GEMM input.
  void enable_bf16_matmuls(const float* master, size_t n) override;
  void weights_changed() override;
  void disable_bf16_matmuls() override;
  Bf16Matmuls* bf16_matmuls() override {
    return this;
  }
  // The bf16 storage path: rmsnorm and the c_fc GEMM write bf16 (the GEMM through cuda::gemm's
  // bf16-output form), a pointwise kernel the GELU; the GEMMs that read them take them as they
  // are.
  void rmsnorm_forward_bf16(uint16_t* y, float* rstd, const float* x, const float* w, int N, int C,
                            float eps) override;
  void store_bf16(uint16_t* y, const float* x, size_t n) override;
  void matmul_forward_bf16(float* y, const uint16_t* x, const float* W, int N, int C, int OC,
                           const float* r) override;
  void matmul_backward_bf16(float* dx, float* dW, const float* dy, const uint16_t* x,
                            const float* W, int N, int C, int OC, bool accumulate_dx) override;
  void matmul_backward_bf16_dy(float* dx, float* dW, const uint16_t* dy, const uint16_t* x,
                               const float* W, int N, int C, int OC) override;
  void rmsnorm_backward_bf16(float* dx, uint16_t* dx16, float* dw, const float* dy, const float* x,
                             const float* w, const float* rstd, int N, int C) override;
  void matmul_gelu_forward_bf16(uint16_t* y, uint16_t* pre, const uint16_t* x, const float* W,
                                int N, int C, int OC) override;
  void matmul_backward_dgelu_bf16(uint16_t* dpre16, float* prod, float* dW, const uint16_t* dy,
                                  const uint16_t* x, const float* W, const uint16_t* pre, int N,
                                  int C, int OC) override;
  void gelu_forward_bf16(uint16_t* y, const uint16_t* pre, size_t n) override;
  size_t attention_saved_operands(const AttnArgs& a) const override;
  void l2norm_backward_saved(float* dx, const AttnArgs& a, AttnOperand which,
                             const float* norm) override;
  void row_dot_bf16(float* out, const uint16_t* a, const float* b, size_t N, int D) override;

 private:
  // A bf16 view of x (n floats): the master copy if x lies in the master buffer, else x cast
  // into activation buffer `slot` (0..2, one per operand of a call).
  const void* bf16_operand(const float* x, size_t n, int slot);
  // The matmul_* methods with the epilogue as an argument (fp32 or bf16 inputs by bf16_).
  void matmul_forward_ep(float* y, const float* x, const float* W, int N, int C, int OC,
                         cuda::Epilogue ep, float* pre);
  void matmul_backward_ep(float* dx, float* dW, const float* dy, const float* x, const float* W,
                          int N, int C, int OC, bool accumulate_dx, cuda::Epilogue ep,
                          const float* pre);
  // The bf16 path's dx = epilogue(dyb W), dW += dyb^T xb (dy and x in bf16; xb null when dW is).
  void backward_bf16(float* dx, float* dW, const __nv_bfloat16* dyb, const __nv_bfloat16* xb,
                     const float* W, int N, int C, int OC, bool accumulate_dx, cuda::Epilogue ep,
                     float* aux);
  bool bf16_ = false;
  const float* master_ = nullptr;
  size_t master_n_ = 0;
  void* wbf16_ = nullptr;  // __nv_bfloat16[master_n_]
  size_t wbf16_n_ = 0;
  void* dlogits_bf16_ = nullptr;  // __nv_bfloat16: one LM-head chunk of dlogits
  size_t dlogits_bf16_n_ = 0;
  void* abf16_[3] = {nullptr, nullptr, nullptr};  // __nv_bfloat16 activation casts
  size_t abf16_n_[3] = {0, 0, 0};

  cuda::AttentionImpl attention_impl_;
  // Device scratch, grown on demand (never inside a kernel).
  float* fscratch_ = nullptr;
  size_t fscratch_n_ = 0;
  uint16_t* hscratch_ = nullptr;  // bf16
  size_t hscratch_n_ = 0;
  double* dscratch_ = nullptr;
  size_t dscratch_n_ = 0;
  float* logits_ = nullptr;
  size_t logits_n_ = 0;
};

}  // namespace tda
