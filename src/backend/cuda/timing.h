// GPU time and memory for the benchmarks (tda bench ... --device cuda), usable without CUDA
// headers (src/cli). Times are CUDA events on the backend's stream (common.h: stream()), so they
// measure the GPU timeline between two points of the host program: the kernels in between and
// any gap the host left (a sync point, a download). Under the SIMT emulator the same calls run
// and the events hold host wall-clock times (docs/emulator.md): the code path is tested here,
// the figures mean nothing.
#pragma once
#include <cstddef>
#include <string>

namespace tda::cuda {

// True in the emulated build (TDA_CUDA_EMU): no GPU, events are host clocks.
bool timing_is_emulated();

// A pair of events. start() and stop() only record (no host sync, so timers can nest without
// adding gaps to the outer one); ms() waits for the stop event and returns the milliseconds
// between the two. Not copyable; throws tda::Error on a CUDA error.
class GpuTimer {
 public:
  GpuTimer();
  ~GpuTimer();
  GpuTimer(const GpuTimer&) = delete;
  GpuTimer& operator=(const GpuTimer&) = delete;
  void start();
  void stop();
  double ms();

 private:
  void* start_ = nullptr;  // cudaEvent_t
  void* stop_ = nullptr;
};

// Device memory the whole device has in use (cudaMemGetInfo: total - free, every process and
// the CUDA context included) and its size. Differences of `used` taken in one process on an
// otherwise idle GPU are what that process allocated in between.
struct DeviceMemory {
  size_t used = 0, total = 0;
};
DeviceMemory device_memory();

// Waits for all work on the device (cudaDeviceSynchronize), throwing on a kernel error.
void synchronize();

// "NVIDIA H100 80GB HBM3" (cudaGetDeviceProperties of the current device).
std::string device_name();

}  // namespace tda::cuda
