// The CUDA device and its event timer (timing.h).
#include "backend/cuda/common.h"
#include "backend/cuda/device_stats.h"
#include "backend/cuda/runtime.h"
#include "backend/cuda/timing.h"

namespace tda::cuda {

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

namespace {

class GpuDevice final : public Device {
 public:
  std::string name() const override {
    int device = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    return prop.name;
  }
  std::string arch() const override {
    int device = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    return "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
  }
  std::string clock() const override {
    return emulated_device() ? "emulated (host clock)" : "cuda events";
  }
  bool timed() const override { return !emulated_device(); }
  std::unique_ptr<DeviceTimer> timer() override { return std::make_unique<GpuTimer>(); }
  size_t memory_used() const override {
    size_t free_bytes = 0, total = 0;
    check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
    return total - free_bytes;
  }
  size_t memory_free() const override {
    size_t free_bytes = 0, total = 0;
    check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
    return free_bytes;
  }
  void synchronize() override { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }
  EmulatedDevice* emulator() override { return emulated_device(); }
};

}  // namespace

Device& gpu_device() {
  static GpuDevice d;
  return d;
}

}  // namespace tda::cuda
