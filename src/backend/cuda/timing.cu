// CUDA-event timer and device memory queries for the benchmarks (timing.h).
#include "backend/cuda/common.h"
#include "backend/cuda/runtime.h"
#include "backend/cuda/timing.h"

namespace tda::cuda {

bool timing_is_emulated() {
#ifdef TDA_CUDA_EMU
  return true;
#else
  return false;
#endif
}

GpuTimer::GpuTimer() {
  cudaEvent_t a = nullptr, b = nullptr;
  check(cudaEventCreate(&a), "GpuTimer cudaEventCreate");
  check(cudaEventCreate(&b), "GpuTimer cudaEventCreate");
  start_ = a;
  stop_ = b;
}

GpuTimer::~GpuTimer() {
  cudaEventDestroy(static_cast<cudaEvent_t>(start_));
  cudaEventDestroy(static_cast<cudaEvent_t>(stop_));
}

void GpuTimer::start() {
  check(cudaEventRecord(static_cast<cudaEvent_t>(start_), stream()), "GpuTimer start");
}

void GpuTimer::stop() {
  check(cudaEventRecord(static_cast<cudaEvent_t>(stop_), stream()), "GpuTimer stop");
}

double GpuTimer::ms() {
  auto* b = static_cast<cudaEvent_t>(stop_);
  check(cudaEventSynchronize(b), "GpuTimer cudaEventSynchronize");
  float ms = 0.f;
  check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_), b), "GpuTimer elapsed");
  return double(ms);
}

DeviceMemory device_memory() {
  size_t free_bytes = 0, total = 0;
  check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
  return DeviceMemory{total - free_bytes, total};
}

void synchronize() {
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

std::string device_name() {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  return prop.name;
}

}  // namespace tda::cuda
