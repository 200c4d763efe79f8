// The emulated driver and device: what cudaGetDeviceCount, cudaSetDevice, cudaGetDeviceProperties
// and the version queries answer (and cudaStreamQuery, which completes at once as every stream
// here is synchronous). Configurable from the environment so that the CUDA backend's
// start-up checks (backend/cuda/startup.cu) can be tested on a machine without a GPU:
//   TDA_EMU_DRIVER_VERSION      the driver's CUDA version as cudaDriverGetVersion gives it
//                               (12040 = 12.4; 0 = no driver installed); default: the runtime's
//   TDA_EMU_DEVICE_COUNT        visible devices (0: none); default 1
//   TDA_EMU_COMPUTE_CAPABILITY  "major.minor"; default 9.0
// A driver of an older major version than the runtime fails every device call with
// cudaErrorInsufficientDriver, as the real runtime does (CUDA 12.x runtimes run on any 12.x
// driver: minor version compatibility; 13.0 needs a 13.x driver).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tda::emu::detail {

inline int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}
inline int driver_version() {
  return env_int("TDA_EMU_DRIVER_VERSION", CUDART_VERSION);
}
// The error every device call returns before one can succeed (cudaSuccess: none).
inline cudaError_t device_error() {
  const int driver = driver_version();
  if (driver == 0 || driver / 1000 < CUDART_VERSION / 1000) return cudaErrorInsufficientDriver;
  if (env_int("TDA_EMU_DEVICE_COUNT", 1) <= 0) return cudaErrorNoDevice;
  return cudaSuccess;
}

}  // namespace tda::emu::detail

extern "C" {

inline cudaError_t cudaDriverGetVersion(int* version) {
  if (!version) return tda::emu::detail::record(cudaErrorInvalidValue);
  *version = tda::emu::detail::driver_version();
  return cudaSuccess;
}
inline cudaError_t cudaRuntimeGetVersion(int* version) {
  if (!version) return tda::emu::detail::record(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

inline cudaError_t cudaGetDeviceCount(int* count) {
  using namespace tda::emu::detail;
  if (!count) return record(cudaErrorInvalidValue);
  *count = 0;
  if (cudaError_t e = device_error(); e != cudaSuccess) return record(e);
  *count = env_int("TDA_EMU_DEVICE_COUNT", 1);
  return cudaSuccess;
}
// Every emulated device is the same host memory: selecting one changes nothing else.
inline cudaError_t cudaSetDevice(int device) {
  using namespace tda::emu::detail;
  if (cudaError_t e = device_error(); e != cudaSuccess) return record(e);
  if (device < 0 || device >= env_int("TDA_EMU_DEVICE_COUNT", 1))
    return record(cudaErrorInvalidDevice);
  return cudaSuccess;
}

inline cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device) {
  using namespace tda::emu::detail;
  if (!prop) return record(cudaErrorInvalidValue);
  if (cudaError_t e = device_error(); e != cudaSuccess) return record(e);
  if (device < 0 || device >= env_int("TDA_EMU_DEVICE_COUNT", 1))
    return record(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "SIMT emulator (CPU)");
  int major = 9, minor = 0;
  if (const char* cc = std::getenv("TDA_EMU_COMPUTE_CAPABILITY"); cc && *cc)
    std::sscanf(cc, "%d.%d", &major, &minor);
  prop->major = major;
  prop->minor = minor;
  prop->totalGlobalMem = tda::emu::memory_stats().cap;  // budget.h
  prop->multiProcessorCount = 1;
  prop->warpSize = 32;
  return cudaSuccess;
}

inline cudaError_t cudaStreamQuery(cudaStream_t stream) {
  (void)stream;  // never cudaErrorNotReady: the work is done (a poll, not a synchronisation)
  return tda::emu::detail::fail_if_sticky();
}

}  // extern "C"
