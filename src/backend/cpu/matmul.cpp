// Linear layers through cpu_sgemm (sgemm.cpp). W is (OC, C) as in PyTorch: y = x W^T.
#include "backend/cpu/cpu_ops.h"

namespace tda {

void CpuOps::matmul_forward(float* y, const float* x, const float* W, int N, int C, int OC) {
  cpu_sgemm(false, true, N, OC, C, 1.0f, x, C, W, C, 0.0f, y, OC);
}

// dx = dy W  (N,OC)x(OC,C);  dW += dy^T x  (OC,N)x(N,C)
void CpuOps::matmul_backward(float* dx, float* dW, const float* dy, const float* x, const float* W,
                             int N, int C, int OC, bool accumulate_dx) {
  if (dx) cpu_sgemm(false, false, N, C, OC, 1.0f, dy, OC, W, C, accumulate_dx ? 1.0f : 0.0f, dx, C);
  if (dW) cpu_sgemm(true, false, OC, C, N, 1.0f, dy, OC, x, C, 1.0f, dW, C);
}

}  // namespace tda
