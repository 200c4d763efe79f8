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
  size_t size() const { return n_; }
  std::vector<T> to_host() const {
    std::vector<T> h(n_);
    cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }

 private:
  size_t n_;
  T* p_ = nullptr;
};

// The tests' own kernels are compiled by the host compiler only, never by nvcc, so the
// emulator's launch-resource table (strict mode) has no ptxas numbers for them: they declare
// modest ones (32 registers, no static shared memory, no launch bounds).
template <auto... Kernels>
bool declare_test_kernels() {
  (tda::emu::set_launch_resources<Kernels>(tda::emu::LaunchResources{{32, 32}, {0, 0}, 1024}), ...);
  return true;
}

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

// Strict mode on (or off) for a scope, restoring the previous setting.
class StrictMode {
 public:
  explicit StrictMode(bool on = true) : saved_(tda::emu::strict()) { tda::emu::set_strict(on); }
  StrictMode(const StrictMode&) = delete;
  StrictMode& operator=(const StrictMode&) = delete;
  ~StrictMode() { tda::emu::set_strict(saved_); }

 private:
  bool saved_;
};

// For a test that provokes a kernel fault: the context stays lost (every call fails with the
// sticky error) until cudaDeviceReset, which this calls at the end of its scope. Declare it
// before the scope's device buffers: their frees fail harmlessly first, then the reset frees
// everything and clears the error.
class ResetDeviceAtExit {
 public:
  ResetDeviceAtExit() = default;
  ResetDeviceAtExit(const ResetDeviceAtExit&) = delete;
  ResetDeviceAtExit& operator=(const ResetDeviceAtExit&) = delete;
  ~ResetDeviceAtExit() { cudaDeviceReset(); }
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
