// tda::cuda::gemm: cuBLAS on a GPU, OpenBLAS under the emulator (see gemm.h).
#include "backend/cuda/gemm.h"

#if defined(__CUDACC__)
#include <cublas_v2.h>
#else
#include <cblas.h>
#endif

#include <vector>

#include "core/error.h"

namespace tda::cuda {

void check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  throw Error(std::string("cuda: ") + what + ": " + cudaGetErrorName(err) + ": " +
              cudaGetErrorString(err));
}

#if defined(__CUDACC__)
namespace {
cublasHandle_t handle() {
  static cublasHandle_t h = [] {
    cublasHandle_t c = nullptr;
    TDA_CHECK(cublasCreate(&c) == CUBLAS_STATUS_SUCCESS, "cuda: cublasCreate failed");
    // Default math: cublasSgemm stays plain fp32 (no TF32 rounding unless the environment sets
    // NVIDIA_TF32_OVERRIDE=1), while cublasGemmEx on bf16 may use tensor cores.
    TDA_CHECK(cublasSetMathMode(c, CUBLAS_DEFAULT_MATH) == CUBLAS_STATUS_SUCCESS,
              "cuda: cublasSetMathMode failed");
    return c;
  }();
  return h;
}
}  // namespace

// cuBLAS is column-major: a row-major (M,N) C is a column-major (N,M) C^T = op(B)^T op(A)^T, so
// the operands swap places and keep their own transposition flags.
void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc) {
  if (M == 0 || N == 0) return;
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  TDA_CHECK(cublasSetStream(handle(), stream()) == CUBLAS_STATUS_SUCCESS,
            "cuda: cublasSetStream failed");
  const cublasStatus_t st =
      cublasSgemm(handle(), op_b, op_a, N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc);
  TDA_CHECK(st == CUBLAS_STATUS_SUCCESS,
            "cuda: cublasSgemm failed (status " + std::to_string(int(st)) + ")");
}

void gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const __nv_bfloat16* A,
               int lda, const __nv_bfloat16* B, int ldb, float beta, float* C, int ldc) {
  if (M == 0 || N == 0) return;
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  TDA_CHECK(cublasSetStream(handle(), stream()) == CUBLAS_STATUS_SUCCESS,
            "cuda: cublasSetStream failed");
  const cublasStatus_t st =
      cublasGemmEx(handle(), op_b, op_a, N, M, K, &alpha, B, CUDA_R_16BF, ldb, A, CUDA_R_16BF, lda,
                   &beta, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  TDA_CHECK(st == CUBLAS_STATUS_SUCCESS,
            "cuda: cublasGemmEx failed (status " + std::to_string(int(st)) + ")");
}
#else
void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc) {
  if (M == 0 || N == 0) return;
  emu::DeviceAccess access;  // emulated cuBLAS reads device memory on the host
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

namespace {
// The stored (rows, cols) matrix with row stride ld, widened to a dense fp32 copy.
std::vector<float> widen(const __nv_bfloat16* x, int rows, int cols, int ld) {
  std::vector<float> out(size_t(rows) * size_t(cols));
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      out[size_t(r) * cols + c] = __bfloat162float(x[size_t(r) * ld + c]);
  return out;
}
}  // namespace

// Emulator: bf16 -> fp32 is exact, so this is the fp32 GEMM of the rounded inputs.
void gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const __nv_bfloat16* A,
               int lda, const __nv_bfloat16* B, int ldb, float beta, float* C, int ldc) {
  if (M == 0 || N == 0) return;
  const int ar = trans_a ? K : M, ac = trans_a ? M : K;
  const int br = trans_b ? N : K, bc = trans_b ? K : N;
  emu::DeviceAccess access;
  const std::vector<float> a = widen(A, ar, ac, lda), b = widen(B, br, bc, ldb);
  gemm(trans_a, trans_b, M, N, K, alpha, a.data(), ac, b.data(), bc, beta, C, ldc);
}
#endif

}  // namespace tda::cuda
