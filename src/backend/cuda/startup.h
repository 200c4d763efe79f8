// Start-up of the CUDA backend. The first CUDA calls of a process find out whether it can use a
// GPU at all with this build (driver new enough for the runtime, a device visible, a compute
// capability the kernels support); each way that fails becomes one line saying what is wrong and
// what to do, and a process that can go on says once which GPU, driver and runtime it got.
// Plain C++ interface: distributed/ calls it without CUDA headers.
#pragma once
#include <string>

namespace tda::cuda {

// Makes this process use CUDA device local_rank % (visible devices), then startup(). Called
// before MPI_Init and before any other CUDA call of a rank (distributed/communicator.cpp), so that
// MPI stacks that look at the current device see the right one. Returns the device.
int bind_device(int local_rank);

// Checks the current device (as above) and prints one line about it, once per process:
//   cuda: rank 3 of 8: device 3 = NVIDIA H100 80GB HBM3 (compute capability 9.0, 79.1 GiB),
//   driver 12.4, runtime 12.4
// Throws tda::Error with the one-line reason otherwise.
void startup();

// The pieces of the above that decide the message, for tests. Versions are CUDA's integers
// (12040 = 12.4); driver 0 means no driver is installed. `error` is a cudaError_t.
std::string version_text(int version);
std::string explain_start_failure(int error, const char* error_text, int driver, int runtime);
// "" when this build can run on the device: compute capability 8.0 or newer, and code for it
// (`has_kernels`: SASS of its architecture or PTX the driver can compile).
std::string explain_unsupported_device(int device, const std::string& name, int major, int minor,
                                       bool has_kernels);

}  // namespace tda::cuda
