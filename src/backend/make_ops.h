// Backends by name ("cpu", "cuda"). The CPU backend is always there; the CUDA backend registers
// itself when its objects are linked in (the emulated build or scripts/build_cuda.sh's nvcc build),
// the way attention variants do, so tda_lib does not depend on CUDA.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "backend/ops.h"

namespace tda {

using OpsFactory = std::function<std::unique_ptr<Ops>()>;
// Returns true (for use in a static initialiser).
bool register_backend(const std::string& device, OpsFactory make);
// Throws tda::Error naming the device and the backends this binary has. threads > 0 sets the
// host threads every backend's host loops use (OpenMP, OpenBLAS; train.threads); 0 keeps them.
std::unique_ptr<Ops> make_ops(const std::string& device, int threads = 0);

}  // namespace tda
