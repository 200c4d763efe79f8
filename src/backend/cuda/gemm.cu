// tda::cuda::gemm: cuBLAS on a GPU, OpenBLAS under the emulator (see gemm.h).
#include "backend/cuda/gemm.h"

#if defined(__CUDACC__)
#include <cublas_v2.h>
#else
#include <cblas.h>
#endif

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
    // Plain fp32: no TF32 tensor-core rounding, so results stay comparable to the CPU backend.
    TDA_CHECK(cublasSetMathMode(c, CUBLAS_PEDANTIC_MATH) == CUBLAS_STATUS_SUCCESS,
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
  const cublasStatus_t st = cublasSgemm(handle(), op_b, op_a, N, M, K, &alpha, B, ldb, A, lda,
                                        &beta, C, ldc);
  TDA_CHECK(st == CUBLAS_STATUS_SUCCESS, "cuda: cublasSgemm failed (status " +
                                             std::to_string(int(st)) + ")");
}
#else
void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc) {
  if (M == 0 || N == 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
#endif

}  // namespace tda::cuda
