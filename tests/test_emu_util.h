// Helpers for the SIMT emulator tests (include after backend/cuda/launch.h).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cuda/runtime.h"

namespace tda::emu_test {

// Device memory filled from / copied back to host vectors.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) { cudaMalloc(&p_, n * sizeof(T)); }
  explicit DeviceBuffer(const std::vector<T>& h) : DeviceBuffer(h.size()) {
    cudaMemcpy(p_, h.data(), n_ * sizeof(T), cudaMemcpyHostToDevice);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(p_); }
  T* get() const { return p_; }
  std::vector<T> to_host() const {
    std::vector<T> h(n_);
    cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }

 private:
  size_t n_;
  T* p_ = nullptr;
};

// Sets the emulator's schedule seed for a scope, restoring the previous one.
class ScheduleSeed {
 public:
  explicit ScheduleSeed(uint64_t seed) : saved_(tda::emu::schedule_seed()) {
    tda::emu::set_schedule_seed(seed);
  }
  ScheduleSeed(const ScheduleSeed&) = delete;
  ScheduleSeed& operator=(const ScheduleSeed&) = delete;
  ~ScheduleSeed() { tda::emu::set_schedule_seed(saved_); }

 private:
  uint64_t saved_;
};

// Turns the emulator's host-access guard on for a scope (allocations made inside it are
// PROT_NONE outside kernels and memcpys), restoring the previous setting.
class HostAccessGuard {
 public:
  explicit HostAccessGuard(bool on = true) : saved_(tda::emu::host_access_guard()) {
    tda::emu::set_host_access_guard(on);
  }
  HostAccessGuard(const HostAccessGuard&) = delete;
  HostAccessGuard& operator=(const HostAccessGuard&) = delete;
  ~HostAccessGuard() { tda::emu::set_host_access_guard(saved_); }

 private:
  bool saved_;
};

}  // namespace tda::emu_test
