// CudaOps: the Ops interface on device pointers. Matmuls through tda::cuda::gemm (cuBLASLt on a
// GPU, the CPU SGEMM under the emulator), everything else through the kernels/*.cu wrappers.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <utility>

#include "backend/cuda/common.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/startup.h"
#include "backend/cuda/timing.h"
#include "backend/make_ops.h"
#include "core/error.h"

namespace tda {

CudaOps::~CudaOps() {
  // Errors are ignored here: a destructor must not throw.
  if (fscratch_) cudaFree(fscratch_);
  if (hscratch_) cudaFree(hscratch_);
  if (dscratch_) cudaFree(dscratch_);
  if (logits_) cudaFree(logits_);
  if (wbf16_) cudaFree(wbf16_);
  if (dlogits_bf16_) cudaFree(dlogits_bf16_);
  for (void* p : abf16_)
    if (p) cudaFree(p);
}

namespace {
__nv_bfloat16* bf16_buffer(void*& buf, size_t& cap, size_t n, const char* what) {
  auto* p = static_cast<__nv_bfloat16*>(buf);
  cuda::scratch(p, cap, n, what);
  buf = p;
  return p;
}
}  // namespace

void CudaOps::enable_bf16_matmuls(const float* master, size_t n) {
  master_ = master;
  master_n_ = n;
  bf16_buffer(wbf16_, wbf16_n_, std::max<size_t>(n, 1), "bf16 weight copy");
  bf16_ = true;
  weights_changed();
}

void CudaOps::disable_bf16_matmuls() {
  bf16_ = false;
  master_ = nullptr;
  master_n_ = 0;
}

void CudaOps::weights_changed() {
  if (bf16_) cuda::cast_to_bf16(static_cast<__nv_bfloat16*>(wbf16_), master_, master_n_);
}

const void* CudaOps::bf16_operand(const float* x, size_t n, int slot) {
  if (x >= master_ && x + n <= master_ + master_n_)
    return static_cast<const __nv_bfloat16*>(wbf16_) + (x - master_);
  __nv_bfloat16* b = bf16_buffer(abf16_[slot], abf16_n_[slot], n, "bf16 GEMM input casts");
  cuda::cast_to_bf16(b, x, n);
  return b;
}

namespace {
const __nv_bfloat16* bf16(const void* p) {
  return static_cast<const __nv_bfloat16*>(p);
}
}  // namespace

// y(N,OC) = epilogue(x(N,C) W(OC,C)^T), aux = pre (see cuda::Epilogue)
void CudaOps::matmul_forward_ep(float* y, const float* x, const float* W, int N, int C, int OC,
                                cuda::Epilogue ep, float* pre) {
  if (bf16_) {
    const auto* xb = bf16(bf16_operand(x, size_t(N) * C, 0));
    const auto* Wb = bf16(bf16_operand(W, size_t(OC) * C, 1));
    cuda::gemm(false, true, N, OC, C, 1.0f, xb, C, Wb, C, 0.0f, y, OC, ep, pre, OC);
    return;
  }
  cuda::gemm(false, true, N, OC, C, 1.0f, x, C, W, C, 0.0f, y, OC, ep, pre, OC);
}

// dx = epilogue(dy W)  (N,OC)x(OC,C), overwritten or accumulated;  dW += dy^T x  (OC,N)x(N,C)
void CudaOps::matmul_backward_ep(float* dx, float* dW, const float* dy, const float* x,
                                 const float* W, int N, int C, int OC, bool accumulate_dx,
                                 cuda::Epilogue ep, const float* pre) {
  const float beta_dx = accumulate_dx ? 1.0f : 0.0f;
  // cuBLASLt reads the DGELU aux; gemm() takes it as float* because GELU_AUX writes it.
  float* aux = const_cast<float*>(pre);
  if (bf16_) {
    const auto* xb = dW ? bf16(bf16_operand(x, size_t(N) * C, 2)) : nullptr;
    backward_bf16(dx, dW, bf16(bf16_operand(dy, size_t(N) * OC, 0)), xb, W, N, C, OC, accumulate_dx,
                  ep, aux);
    return;
  }
  if (dx) cuda::gemm(false, false, N, C, OC, 1.0f, dy, OC, W, C, beta_dx, dx, C, ep, aux, C);
  if (dW) cuda::gemm(true, false, OC, C, N, 1.0f, dy, OC, x, C, 1.0f, dW, C);
}

// The bf16 form of matmul_backward_ep, dy and x already in bf16.
void CudaOps::backward_bf16(float* dx, float* dW, const __nv_bfloat16* dyb, const __nv_bfloat16* xb,
                            const float* W, int N, int C, int OC, bool accumulate_dx,
                            cuda::Epilogue ep, float* aux) {
  if (dx) {
    const auto* Wb = bf16(bf16_operand(W, size_t(OC) * C, 1));
    cuda::gemm(false, false, N, C, OC, 1.0f, dyb, OC, Wb, C, accumulate_dx ? 1.0f : 0.0f, dx, C, ep,
               aux, C);
  }
  if (dW) cuda::gemm(true, false, OC, C, N, 1.0f, dyb, OC, xb, C, 1.0f, dW, C);
}

void CudaOps::matmul_forward(float* y, const float* x, const float* W, int N, int C, int OC) {
  matmul_forward_ep(y, x, W, N, C, OC, cuda::Epilogue::kNone, nullptr);
}
void CudaOps::matmul_backward(float* dx, float* dW, const float* dy, const float* x, const float* W,
                              int N, int C, int OC, bool accumulate_dx) {
  matmul_backward_ep(dx, dW, dy, x, W, N, C, OC, accumulate_dx, cuda::Epilogue::kNone, nullptr);
}
void CudaOps::matmul_gelu_forward(float* y, float* pre, const float* x, const float* W, int N,
                                  int C, int OC) {
  matmul_forward_ep(y, x, W, N, C, OC, cuda::Epilogue::kGeluAux, pre);
}
void CudaOps::matmul_residual_forward(float* y, const float* x, const float* W, int N, int C,
                                      int OC, const float* r) {
  // gemm() takes aux as float* because GELU_AUX writes it; the residual is only read.
  matmul_forward_ep(y, x, W, N, C, OC, cuda::Epilogue::kResidual, const_cast<float*>(r));
}
void CudaOps::matmul_backward_dgelu(float* dpre, float* dW, const float* dy, const float* x,
                                    const float* W, const float* pre, int N, int C, int OC) {
  matmul_backward_ep(dpre, dW, dy, x, W, N, C, OC, false, cuda::Epilogue::kDgelu, pre);
}

namespace {
__nv_bfloat16* bf16_bits(uint16_t* p) {
  return reinterpret_cast<__nv_bfloat16*>(p);
}
const __nv_bfloat16* bf16_bits(const uint16_t* p) {
  return reinterpret_cast<const __nv_bfloat16*>(p);
}
}  // namespace

void CudaOps::rmsnorm_forward_bf16(uint16_t* y, float* rstd, const float* x, const float* w, int N,
                                   int C, float eps) {
  cuda::rmsnorm_forward(bf16_bits(y), rstd, x, w, N, C, eps);
}

void CudaOps::store_bf16(uint16_t* y, const float* x, size_t n) {
  cuda::cast_to_bf16(bf16_bits(y), x, n);  // the kernel bf16_operand's casts run
}

void CudaOps::matmul_gelu_forward_bf16(uint16_t* y, uint16_t* pre, const uint16_t* x,
                                       const float* W, int N, int C, int OC) {
  TDA_CHECK(bf16_, "cuda: matmul_gelu_forward_bf16 without enable_bf16_matmuls()");
  const auto* Wb = bf16(bf16_operand(W, size_t(OC) * C, 1));
  cuda::gemm(false, true, N, OC, C, 1.0f, bf16_bits(x), C, Wb, C, bf16_bits(pre), OC);
  cuda::gelu_forward(bf16_bits(y), bf16_bits(pre), size_t(N) * OC);
}

void CudaOps::gelu_forward_bf16(uint16_t* y, const uint16_t* pre, size_t n) {
  cuda::gelu_forward(bf16_bits(y), bf16_bits(pre), n);  // matmul_gelu_forward_bf16's kernel
}

void CudaOps::matmul_forward_bf16(float* y, const uint16_t* x, const float* W, int N, int C, int OC,
                                  const float* r) {
  TDA_CHECK(bf16_, "cuda: matmul_forward_bf16 without enable_bf16_matmuls()");
  const auto* Wb = bf16(bf16_operand(W, size_t(OC) * C, 1));
  const auto ep = r ? cuda::Epilogue::kResidual : cuda::Epilogue::kNone;
  cuda::gemm(false, true, N, OC, C, 1.0f, bf16_bits(x), C, Wb, C, 0.0f, y, OC, ep,
             const_cast<float*>(r), OC);
}

void CudaOps::matmul_backward_bf16(float* dx, float* dW, const float* dy, const uint16_t* x,
                                   const float* W, int N, int C, int OC, bool accumulate_dx) {
  TDA_CHECK(bf16_, "cuda: matmul_backward_bf16 without enable_bf16_matmuls()");
  backward_bf16(dx, dW, bf16(bf16_operand(dy, size_t(N) * OC, 0)), bf16_bits(x), W, N, C, OC,
                accumulate_dx, cuda::Epilogue::kNone, nullptr);
}

void CudaOps::matmul_backward_bf16_dy(float* dx, float* dW, const uint16_t* dy, const uint16_t* x,
                                      const float* W, int N, int C, int OC) {
  TDA_CHECK(bf16_, "cuda: matmul_backward_bf16_dy without enable_bf16_matmuls()");
  backward_bf16(dx, dW, bf16_bits(dy), bf16_bits(x), W, N, C, OC, false, cuda::Epilogue::kNone,
                nullptr);
}

// dx16 null: Ops::rmsnorm_backward (the fp32 path calls it that way).
void CudaOps::rmsnorm_backward_bf16(float* dx, uint16_t* dx16, float* dw, const float* dy,
                                    const float* x, const float* w, const float* rstd, int N,
                                    int C) {
  float* s = cuda::scratch(fscratch_, fscratch_n_, cuda::rmsnorm_backward_scratch(N, C),
                           "backward scratch (rmsnorm dw partials)");
  cuda::rmsnorm_backward(dx, dw, dy, x, w, rstd, N, C, s, bf16_bits(dx16));
}

// The DGELU runs as a pointwise pass after the dy W product (cuBLASLt's DGELU epilogue reads an
// fp32 aux, and pre is stored in bf16), and writes dpre in bf16 for c_fc's backward GEMMs.
void CudaOps::matmul_backward_dgelu_bf16(uint16_t* dpre16, float* prod, float* dW,
                                         const uint16_t* dy, const uint16_t* x, const float* W,
                                         const uint16_t* pre, int N, int C, int OC) {
  TDA_CHECK(bf16_, "cuda: matmul_backward_dgelu_bf16 without enable_bf16_matmuls()");
  backward_bf16(prod, dW, bf16_bits(dy), bf16_bits(x), W, N, C, OC, false, cuda::Epilogue::kNone,
                nullptr);
  cuda::gelu_backward(bf16_bits(dpre16), bf16_bits(pre), prod, size_t(N) * C);
}

void CudaOps::rmsnorm_forward(float* y, float* rstd, const float* x, const float* w, int N, int C,
                              float eps) {
  cuda::rmsnorm_forward(y, rstd, x, w, N, C, eps);
}

void CudaOps::rmsnorm_backward(float* dx, float* dw, const float* dy, const float* x,
                               const float* w, const float* rstd, int N, int C) {
  rmsnorm_backward_bf16(dx, nullptr, dw, dy, x, w, rstd, N, C);  // no bf16 copy
}

void CudaOps::gelu_forward(float* y, const float* x, size_t n) {
  cuda::gelu_forward(y, x, n);
}
void CudaOps::gelu_backward(float* dx, const float* x, const float* dy, size_t n) {
  cuda::gelu_backward(dx, x, dy, n);
}
void CudaOps::add(float* y, const float* a, const float* b, size_t n) {
  cuda::add(y, a, b, n);
}
void CudaOps::add_inplace(float* y, const float* a, size_t n) {
  cuda::add_inplace(y, a, n);
}

void CudaOps::embedding_forward(float* y, const int32_t* tokens, const float* wte, int N, int C) {
  cuda::embedding_forward(y, tokens, wte, N, C);
}
void CudaOps::embedding_backward(float* dwte, const float* dy, const int32_t*, const int32_t* plan,
                                 int N, int C) {
  cuda::embedding_backward(dwte, dy, plan, N, C);
}

void CudaOps::rope_forward(float* out, const float* x, int row, int col0, const float* cos,
                           const float* sin, int B, int T, int H, int D, int pos0) {
  cuda::rope_forward(out, x, row, col0, cos, sin, B, T, H, D, pos0);
}
void CudaOps::rope_backward(float* dx, const float* dout, int row, int col0, const float* cos,
                            const float* sin, int B, int T, int H, int D, int pos0,
                            const float* row_scale, int scale_h_stride) {
  cuda::rope_backward(dx, dout, row, col0, cos, sin, B, T, H, D, pos0, row_scale, scale_h_stride);
}
void CudaOps::split_heads(float* out, const float* x, int row, int col0, int B, int T, int H,
                          int D) {
  cuda::split_heads(out, x, row, col0, B, T, H, D);
}
void CudaOps::merge_heads(float* x, const float* in, int row, int col0, int B, int T, int H,
                          int D) {
  cuda::merge_heads(x, in, row, col0, B, T, H, D);
}

void CudaOps::lm_head_loss(float* losses, float* dx, float* dW, const float* x, const float* W,
                           const int32_t* targets, int N, int C, int V_padded, int V_real,
                           float grad_scale) {
  TDA_CHECK(V_real >= 1 && V_real <= V_padded, "lm_head_loss: need 1 <= V_real <= V_padded");
  TDA_CHECK(!dx == !dW, "lm_head_loss: dx and dW go together");
  const size_t chunk = cuda::lm_head_scratch(N, V_padded);
  float* s = cuda::scratch(logits_, logits_n_, chunk, "LM-head logits chunk");
  if (!bf16_) {
    cuda::lm_head_loss(losses, dx, dW, x, W, targets, N, C, V_padded, V_real, grad_scale, s);
    return;
  }
  // bf16 GEMM inputs as for every other matmul: x cast, W from the weights' bf16 copy.
  const cuda::Bf16Operands bf{
      bf16(bf16_operand(x, size_t(N) * C, 0)), bf16(bf16_operand(W, size_t(V_padded) * C, 1)),
      dx ? bf16_buffer(dlogits_bf16_, dlogits_bf16_n_, chunk, "bf16 LM-head dlogits chunk")
         : nullptr};
  cuda::lm_head_loss(losses, dx, dW, x, W, targets, N, C, V_padded, V_real, grad_scale, s, &bf);
}

// logits(V) = W(V,C) x(C)
void CudaOps::lm_head_logits(float* logits, const float* x, const float* W, int C, int V) {
  cuda::gemm(false, true, 1, V, C, 1.0f, x, C, W, C, 0.0f, logits, V);
}

void CudaOps::attention_forward(const AttnArgs& a) {
  if (cuda::SdpaPrimitive* p = attention_impl_.vendor_for(a, /*backward=*/false)) {
    uint16_t* h = cuda::scratch(hscratch_, hscratch_n_, cuda::vendor_scratch_halves(a, false),
                                "attention operands and cuDNN outputs (bf16)");
    float* f = cuda::scratch(fscratch_, fscratch_n_, cuda::vendor_scratch_floats(a),
                             "cuDNN attention lse rows");
    cuda::vendor_attention_forward(*p, a, h, f);
    return;
  }
  uint16_t* ops =
      a.saved ? nullptr  // the copies go to a.saved
              : cuda::scratch(hscratch_, hscratch_n_, cuda::attention_operands_scratch(a, false),
                              "attention operands (bf16 q, k, v, dO)");
  const AttnFwdShape shape = attention_impl_.fwd_shape(a);
  if (a.fwd_block_rows == 0 && a.fwd_block_keys == 0 && (shape.rows || shape.keys)) {
    AttnArgs b = a;
    b.fwd_block_rows = shape.rows;
    b.fwd_block_keys = shape.keys;
    cuda::attention_forward(b, ops);
    return;
  }
  cuda::attention_forward(a, ops);
}

size_t CudaOps::attention_saved_operands(const AttnArgs& a) const {
  AttnArgs unsaved = a;
  unsaved.saved = nullptr;
  return cuda::attention_operands_scratch(unsaved, false);
}

void CudaOps::l2norm_backward_saved(float* dx, const AttnArgs& a, AttnOperand which,
                                    const float* norm) {
  cuda::attention_l2norm_backward_saved(dx, a, which, norm);
}

void CudaOps::row_dot_bf16(float* out, const uint16_t* a, const float* b, size_t N, int D) {
  cuda::row_dot(out, bf16_bits(a), b, N, D);
}

void CudaOps::attention_backward(const AttnArgs& a) {
  if (cuda::SdpaPrimitive* p = attention_impl_.vendor_for(a, /*backward=*/true)) {
    uint16_t* h = cuda::scratch(hscratch_, hscratch_n_, cuda::vendor_scratch_halves(a, true),
                                "attention operands and cuDNN outputs (bf16)");
    float* f = cuda::scratch(fscratch_, fscratch_n_, cuda::vendor_scratch_floats(a),
                             "cuDNN attention lse rows");
    cuda::vendor_attention_backward(*p, a, h, f);
    return;
  }
  float* s = cuda::scratch(fscratch_, fscratch_n_, cuda::attention_backward_scratch(a),
                           "backward scratch (attention D_i)");
  uint16_t* ops = cuda::scratch(hscratch_, hscratch_n_, cuda::attention_operands_scratch(a, true),
                                "attention operands (bf16 q, k, v, dO)");
  // The call's own shape (atomic_dq or bwd_stages set: a test's) wins over the backend's.
  const AttnBwdShape shape = attention_impl_.bwd_shape(a);
  AttnArgs b = a;
  b.atomic_dq = a.atomic_dq || shape.atomic;
  if (a.bwd_stages == 0) b.bwd_stages = shape.stages;
  cuda::attention_backward(b, s, ops);
}

double CudaOps::sum_squares(const float* x, size_t n) {
  double* s = cuda::scratch(dscratch_, dscratch_n_, cuda::sum_squares_scratch(),
                            "reduction partials (double)");
  return cuda::sum_squares(x, n, s);
}

void CudaOps::scale(float* x, size_t n, float s) {
  cuda::scale(x, n, s);
}

void CudaOps::adamw(float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1,
                    float beta2, float eps, float wd, int t) {
  cuda::adamw(p, g, m, v, n, lr, beta1, beta2, eps, wd, t);
}

void CudaOps::adamw_clip_zero(float* p, float* g, float* m, float* v, size_t n, float lr,
                              float beta1, float beta2, float eps, float wd, int t,
                              float grad_scale) {
  cuda::adamw_clip_zero(p, g, m, v, n, lr, beta1, beta2, eps, wd, t, grad_scale);
}

void CudaOps::zero(float* x, size_t n) {
  cuda::zero(x, n);
}

void CudaOps::axpby(float* y, float a, const float* x, float b, size_t n, const float* s) {
  cuda::axpby(y, a, x, b, n, s);
}
void CudaOps::clamp_affine(float* out, const float* x, float a, float b, float lo, float hi) {
  cuda::clamp_affine(out, x, a, b, lo, hi);
}
void CudaOps::diff_lambda(float* out, const float* lq1, const float* lk1, const float* lq2,
                          const float* lk2, int d, float init) {
  cuda::diff_lambda(out, lq1, lk1, lq2, lk2, d, init);
}
void CudaOps::diff_lambda_backward(float* dlq1, float* dlk1, float* dlq2, float* dlk2,
                                   const float* lq1, const float* lk1, const float* lq2,
                                   const float* lk2, const float* e, const float* dl_sum, int d) {
  cuda::diff_lambda_backward(dlq1, dlk1, dlq2, dlk2, lq1, lk1, lq2, lk2, e, dl_sum, d);
}
void CudaOps::position_scales(float* f, const float* s, const float* b, float div, int H, int T) {
  cuda::position_scales(f, s, b, div, H, T);
}

void CudaOps::l2norm_forward(float* x, float* norm, size_t N, int D) {
  cuda::l2norm_forward(x, norm, N, D);
}
void CudaOps::l2norm_backward(float* dx, const float* xhat, const float* norm, size_t N, int D) {
  cuda::l2norm_backward(dx, xhat, norm, N, D);
}
void CudaOps::row_dot(float* out, const float* a, const float* b, size_t N, int D) {
  cuda::row_dot(out, a, b, N, D);
}
void CudaOps::head_row_sum(float* dst, const float* x, const float* w, float scale, int B, int H,
                           int T) {
  double* s = cuda::scratch(dscratch_, dscratch_n_, cuda::head_row_sum_scratch(B, H, T),
                            "reduction partials (double)");
  cuda::head_row_sum(dst, x, w, scale, B, H, T, s);
}
void CudaOps::threshold_tau(float* out, const float* beta, float beta_fixed, bool derivative, int T,
                            double kappa, int d) {
  cuda::threshold_tau(out, beta, beta_fixed, derivative, T, kappa, d);
}
void CudaOps::sigmoid_gate_forward(float* y, const float* o, const float* z, int z_stride, int B,
                                   int T, int H, int D, int group) {
  cuda::sigmoid_gate_forward(y, o, z, z_stride, B, T, H, D, group);
}
void CudaOps::sigmoid_gate_backward(float* g, float* dz, int dz_stride, const float* dy,
                                    const float* o, const float* z, int z_stride, int B, int T,
                                    int H, int D, int group) {
  cuda::sigmoid_gate_backward(g, dz, dz_stride, dy, o, z, z_stride, B, T, H, D, group);
}
void CudaOps::rela_norm_forward(float* y, float* r, float* mu, const float* u, const float* gamma,
                                const float* w, int N, int C, float eps, bool center) {
  cuda::rela_norm_forward(y, r, mu, u, gamma, w, N, C, eps, center);
}
void CudaOps::rela_norm_backward(float* du, float* dgamma, float* dw, const float* dy,
                                 const float* u, const float* r, const float* mu,
                                 const float* gamma, const float* w, int N, int C, bool center) {
  float* s = cuda::scratch(fscratch_, fscratch_n_, cuda::rela_norm_backward_scratch(N, C),
                           "backward scratch (ReLA norm partials)");
  cuda::rela_norm_backward(du, dgamma, dw, dy, u, r, mu, gamma, w, N, C, center, s);
}

void* CudaOps::alloc_bytes(size_t bytes, const std::string& what) {
  return cuda::device_alloc(bytes, what);
}
void CudaOps::free_bytes(void* p) {
  const cudaError_t err = cudaFree(p);
  // After a kernel fault the context is gone and its memory with it; the call that surfaced the
  // fault has thrown (and every later call says so), so a free must not throw on top of it:
  // frees run in destructors while that error unwinds the stack.
  if (err != cudaSuccess && !cuda::context_lost(err)) cuda::check(err, "cudaFree");
}
void CudaOps::upload(void* dst, const void* host_src, size_t bytes) {
  cuda::check(cudaMemcpy(dst, host_src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy upload");
}
void CudaOps::download(void* host_dst, const void* src, size_t bytes) {
  cuda::check(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy download");
}
void CudaOps::copy(void* dst, const void* src, size_t bytes) {
  cuda::check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy copy");
}

Device& CudaOps::device() {
  return cuda::gpu_device();
}

namespace {
// `--device cuda`: registered when these objects are linked (make_ops.h).
std::unique_ptr<Ops> make_cuda_ops() {
  cuda::startup();  // driver, device and compute capability checks; says which GPU (startup.h)
#ifdef TDA_CUDA_EMU
  static bool warned = false;  // once per process, like startup()'s line
  if (!std::exchange(warned, true))
    std::fprintf(stderr,
                 "warning: device cuda runs on the CPU SIMT emulator in this build (for testing; "
                 "very slow). scripts/build_cuda.sh builds build-cuda/tda for a GPU.\n");
#endif
  return std::make_unique<CudaOps>();
}
const bool registered = register_backend("cuda", make_cuda_ops);
}  // namespace

}  // namespace tda
