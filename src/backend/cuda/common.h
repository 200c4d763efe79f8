// The CUDA backend's common host header: the error check every host wrapper uses (check,
// context_lost), the backend's stream, scratch buffers, the bf16 casts, and the one matmul entry
// point (gemm, implemented in gemm.cu / gemm_lt.cu). Under nvcc gemm() is cublasLtMatmul
// (gemm_lt.cu: fp32 accumulation, CUBLAS_COMPUTE_32F, so no TF32 rounding), with cuBLASLt's GELU
// epilogues when asked; under the SIMT emulator (TDA_CUDA_EMU) it is the CPU SGEMM (OpenBLAS
// cblas_sgemm, the routine CpuOps uses, so the emulated backend's matmuls are bit-identical to the
// CPU's) followed by the GELU kernels of kernels/elementwise.cu for a GELU epilogue, which is also
// what a GPU runs when cuBLASLt cannot fuse one (aux row stride not a multiple of 8, or no
// algorithm for the problem). The residual epilogue is cuBLASLt's beta C with C apart from the
// output: the emulated call adds it on the host, one fp32 add as cuBLASLt's, and a GPU whose
// cuBLASLt refuses it runs the add_inplace kernel after the product.
#pragma once

#include <string>

#include "backend/cuda/device_alloc.h"
#include "backend/cuda/runtime.h"

namespace tda::cuda {

// Throws tda::Error("cuda: <what>: <error name>: <message> (<detail>)") unless err ==
// cudaSuccess. The detail is the emulator's message (which kernel, which argument, which
// allocation); on a GPU, for a kernel fault, how to find the kernel (faults surface at a later
// call unless TDA_CUDA_SYNC=1).
void check(cudaError_t err, const char* what);

// The errors after which the CUDA context is lost (a kernel fault): every later call returns
// them, so freeing memory is moot and must not throw (DeviceArray destructors run after them).
bool context_lost(cudaError_t err);

// cuBLAS recommends 32 MiB of workspace on Hopper (4 MiB before). gemm_lt.cu allocates it at the
// first GEMM and keeps it; the emulator reserves as much of its device memory at that point.
constexpr size_t kLtWorkspaceBytes = size_t(32) << 20;

// What gemm() does to the product P = alpha op(A) op(B) before storing it (gelu: tanh form):
//   kNone     C = P + beta C
//   kGeluAux  aux = P, C = gelu(P)                 (aux: the pre-activation a backward needs)
//   kDgelu    C = P * gelu'(aux)                   (aux: that pre-activation, read only)
//   kResidual C = P + aux                          (aux: the residual stream, read only)
// aux is (M,N) fp32 with row stride ld_aux and must not overlap C; the epilogues need beta == 0
// (nothing accumulates into an activation or into an input gradient). kResidual is a linear
// layer writing into the residual stream (x_out = x + y W^T) with no add pass of its own.
enum class Epilogue { kNone, kGeluAux, kDgelu, kResidual };

// Row-major C(M,N) = alpha op(A) op(B) + beta C, op(X) = X or X^T as in cblas_sgemm:
// op(A) is (M,K), op(B) is (K,N); lda/ldb/ldc are row strides of the stored matrices.
void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc, Epilogue ep = Epilogue::kNone,
          float* aux = nullptr, int ld_aux = 0);

// bf16 inputs, fp32 output and fp32 accumulation (tensor cores on sm_80+); the same layout and
// epilogue conventions. Under the emulator the inputs are widened to fp32 (exact) and go through
// the fp32 path above.
void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const __nv_bfloat16* A,
          int lda, const __nv_bfloat16* B, int ldb, float beta, float* C, int ldc,
          Epilogue ep = Epilogue::kNone, float* aux = nullptr, int ld_aux = 0);

// bf16 inputs and a bf16 C = bf16(alpha op(A) op(B)): fp32 accumulation, one rounding to
// nearest even per element, nothing accumulated into C and no epilogue. It stores an activation
// in bf16 (half the memory) without an fp32 copy first.
void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const __nv_bfloat16* A,
          int lda, const __nv_bfloat16* B, int ldb, __nv_bfloat16* C, int ldc);

// Casts (kernels/cast.cu): y = bf16(x) rounded to nearest even; x = float(y) (exact).
void cast_to_bf16(__nv_bfloat16* y, const float* x, size_t n);
void cast_to_float(float* x, const __nv_bfloat16* y, size_t n);

// The backend's stream (the legacy default stream in this version).
inline cudaStream_t stream() {
  return nullptr;
}

// Grows a device scratch buffer to at least `n` elements (never shrinks); frees with cudaFree.
// `what` names it in an out-of-memory error.
template <class T>
T* scratch(T*& buf, size_t& cap, size_t n, const char* what) {
  if (n > cap) {
    if (buf) check(cudaFree(buf), "cudaFree");
    buf = nullptr;
    cap = 0;
    buf = static_cast<T*>(device_alloc(n * sizeof(T), what));
    cap = n;
  }
  return buf;
}

}  // namespace tda::cuda
