// Optional backend capability: bf16 matmul inputs with fp32 master weights (train.dtype "bf16").
// A backend that has it (CudaOps) also derives from this; the trainer finds it with
// dynamic_cast and refuses bf16 on backends without it (CpuOps).
//
// After enable_bf16_matmuls(master, n), the matmul methods (matmul_forward/backward and the
// fused GELU pair matmul_gelu_forward/matmul_backward_dgelu) round their GEMM inputs to bf16 and
// accumulate and write fp32 (GELU and its aux stay fp32). A weight operand inside the flat fp32
// master buffer [master, master + n) is read from the backend's bf16 copy of it, which
// weights_changed() refreshes: the trainer calls it after every change to the master weights (init,
// load, step).
#pragma once
#include <cstddef>

namespace tda {

class Bf16Matmuls {
 public:
  virtual ~Bf16Matmuls() = default;
  virtual void enable_bf16_matmuls(const float* master, size_t n) = 0;
  virtual void weights_changed() = 0;
};

}  // namespace tda
