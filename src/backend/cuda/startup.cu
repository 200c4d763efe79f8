// Start-up checks and report of the CUDA backend (startup.h). Under the SIMT emulator the driver,
// device count and compute capability come from emu/driver.h (configurable, so every message
// here is tested); under nvcc from the real runtime.
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "backend/cuda/common.h"
#include "backend/cuda/runtime.h"
#include "backend/cuda/startup.h"
#include "core/error.h"
#include "distributed/communicator.h"

namespace tda::cuda {

namespace {
// Whether this binary carries code the device can run: SASS of its major architecture or PTX it
// can compile. Asked of a kernel built with the same flags as all the others (under the
// emulator every kernel runs).
#if defined(__CUDACC__)
__global__ void probe_kernel() {}
#endif
bool has_kernels_for_current_device() {
#if defined(__CUDACC__)
  cudaFuncAttributes attr{};
  const cudaError_t e = cudaFuncGetAttributes(&attr, probe_kernel);
  if (e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction) {
    (void)cudaGetLastError();
    return false;
  }
  check(e, "cudaFuncGetAttributes");
#endif
  return true;
}

int query_version(cudaError_t (*get)(int*)) {
  int v = 0;
  if (get(&v) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return v;
}

// The first device call: the one that fails when the driver or the device is missing.
int device_count() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaSuccess && count > 0) return count;
  (void)cudaGetLastError();
  const cudaError_t why = e == cudaSuccess ? cudaErrorNoDevice : e;
  throw Error(explain_start_failure(int(why), cudaGetErrorString(why),
                                    query_version(cudaDriverGetVersion),
                                    query_version(cudaRuntimeGetVersion)));
}

std::once_flag g_reported;

void check_and_report(int device) {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  const std::string bad = explain_unsupported_device(device, prop.name, prop.major, prop.minor,
                                                     has_kernels_for_current_device());
  if (!bad.empty()) throw Error(bad);
  std::call_once(g_reported, [&] {
    const LaunchEnv env = launch_env();
    const std::string who = env.launched ? "rank " + std::to_string(env.rank) + " of " +
                                               std::to_string(env.world) + ": "
                                         : std::string();
    std::fprintf(stderr,
                 "cuda: %sdevice %d = %s (compute capability %d.%d, %.1f GiB), driver %s, "
                 "runtime %s\n",
                 who.c_str(), device, prop.name, prop.major, prop.minor,
                 double(prop.totalGlobalMem) / double(size_t(1) << 30),
                 version_text(query_version(cudaDriverGetVersion)).c_str(),
                 version_text(query_version(cudaRuntimeGetVersion)).c_str());
    std::fflush(stderr);
  });
}
}  // namespace

std::string version_text(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

std::string explain_start_failure(int error, const char* error_text, int driver, int runtime) {
  const std::string rt = version_text(runtime);
  switch (cudaError_t(error)) {
    case cudaErrorInsufficientDriver:
      if (driver == 0)
        return "no NVIDIA driver on this machine (libcuda.so.1 is missing or does not load): run "
               "on a GPU node, or install the NVIDIA driver";
      if (driver / 1000 < runtime / 1000 && driver / 1000 >= 12)
        return "CUDA driver " + version_text(driver) + " is older than this build's runtime " + rt +
               ": rebuild with a CUDA " + std::to_string(driver / 1000) +
               ".x toolkit (docs/cuda.md) or update the NVIDIA driver";
      return "CUDA driver " + version_text(driver) + " is older than this build's runtime " + rt +
             ": update the NVIDIA driver (a CUDA 12.x build needs driver 525 or newer, 13.x needs "
             "580; docs/cuda.md)";
    case cudaErrorNoDevice: {
      const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
      return std::string("no CUDA device visible to this process") +
             (visible ? std::string(" (CUDA_VISIBLE_DEVICES=\"") + visible + "\")" : "") +
             ": run on a GPU node and ask the scheduler for GPUs (e.g. srun --gpus-per-task=1); "
             "nvidia-smi lists what the node has";
    }
    case cudaErrorSystemDriverMismatch:
      return "the NVIDIA kernel module and the user-space driver (libcuda.so, CUDA " +
             version_text(driver) +
             ") do not match: the driver was updated without a reboot, or a container brings "
             "its own libcuda; reboot or use the host's driver libraries";
    case cudaErrorCompatNotSupportedOnDevice:
      return "the CUDA forward-compatibility libcuda (CUDA " + version_text(driver) +
             ") does not support this GPU: take it off LD_LIBRARY_PATH and rebuild with the "
             "CUDA toolkit of the installed driver (docs/cuda.md)";
    default:
      return std::string("the CUDA runtime ") + rt + " cannot start (driver " +
             (driver ? version_text(driver) : std::string("none")) + "): " + error_text;
  }
}

std::string explain_unsupported_device(int device, const std::string& name, int major, int minor,
                                       bool has_kernels) {
  const std::string gpu = "GPU " + std::to_string(device) + " (" + name + ", compute capability " +
                          std::to_string(major) + "." + std::to_string(minor) + ")";
  if (major < 8)
    return gpu +
           " is too old: tda's bf16 tensor-core kernels need compute capability 8.0 or newer "
           "(A100, H100, L40, RTX 30xx and later)";
  if (!has_kernels)
    return gpu +
           " has no kernels in this build: add its architecture to CMAKE_CUDA_ARCHITECTURES "
           "(CMakeLists.txt) and rebuild with a toolkit that knows it (docs/cuda.md)";
  return "";
}

int bind_device(int local_rank) {
  const int device = local_rank % device_count();
  check(cudaSetDevice(device), "cudaSetDevice");
  check_and_report(device);
  return device;
}

void startup() {
  device_count();
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check_and_report(device);
}

}  // namespace tda::cuda
