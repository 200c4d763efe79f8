// The GPU as measurements see it (backend/device.h), without CUDA headers: CudaOps::device().
// Times are CUDA events on the backend's stream (common.h: stream()), so they measure the GPU
// timeline between two points of the host program: the kernels in between and any gap the host
// left (a sync point, a download). Under the SIMT emulator the same calls run and the events
// hold host wall-clock times (docs/emulator.md): the code path is tested here, the figures mean
// nothing (Device::timed() is false there).
#pragma once
#include "backend/device.h"

namespace tda::cuda {

// A pair of events. Not copyable; throws tda::Error on a CUDA error.
class GpuTimer final : public DeviceTimer {
 public:
  GpuTimer();
  ~GpuTimer() override;
  GpuTimer(const GpuTimer&) = delete;
  GpuTimer& operator=(const GpuTimer&) = delete;
  void start() override;
  void stop() override;
  double ms() override;

 private:
  void* start_ = nullptr;  // cudaEvent_t
  void* stop_ = nullptr;
};

// The current CUDA device: cudaGetDeviceProperties' name, events, cudaMemGetInfo's used bytes,
// cudaDeviceSynchronize; in the emulated build, the emulator's controls (device_stats.h).
Device& gpu_device();

}  // namespace tda::cuda
