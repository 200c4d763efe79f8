// Linear layers through OpenBLAS SGEMM. W is (OC, C) as in PyTorch: y = x W^T.
#include <cblas.h>

#include "backend/cpu/cpu_ops.h"

namespace tda {

void CpuOps::matmul_forward(float* y, const float* x, const float* W, int N, int C, int OC) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, x, C, W, C, 0.0f, y, OC);
}

// dx = dy W  (N,OC)x(OC,C);  dW += dy^T x  (OC,N)x(N,C)
void CpuOps::matmul_backward(float* dx, float* dW, const float* dy, const float* x, const float* W,
                             int N, int C, int OC, bool accumulate_dx) {
  if (dx)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dy, OC, W, C,
                accumulate_dx ? 1.0f : 0.0f, dx, C);
  if (dW)
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dy, OC, x, C, 1.0f, dW, C);
}

}  // namespace tda
