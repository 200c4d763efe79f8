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
#pragma once
#include <cstddef>

namespace tda {

class Bf16Matmuls {
 public:
  virtual ~Bf16Matmuls() = default;
  virtual void enable_bf16_matmuls(const float* master, size_t n) = 0;
  virtual void weights_changed() = 0;
  // Back to fp32 matmuls, the master buffer forgotten (its owner is going away: memory at those
  // addresses must not be read through the stale copy later).
  virtual void disable_bf16_matmuls() = 0;
};

}  // namespace tda
