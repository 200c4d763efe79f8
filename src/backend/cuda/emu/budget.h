// Emulated device memory as a GPU would count it: a capacity (TDA_EMU_DEVICE_GB, or
// set_device_memory_cap), live and peak bytes, and the name of what each allocation holds, so that
// an emulated run fails with cudaErrorMemoryAllocation where a GPU of that size would, and can say
// which buffers filled the memory. The allocations are the runtime's one table
// (RuntimeState::live, emu/state.h): memory.h calls in here when it adds or removes one; the
// backend names its allocations (AllocationName) and reserves the cuBLASLt workspace it would
// allocate on a GPU (reserve_device_memory).
//
// What is counted: every allocation as asked, rounded up to whole 2 MiB pages, the page size the
// CUDA driver maps device memory with (an upper bound for small buffers, which the driver may pack
// into one page; exact for the large ones that decide whether a model fits). Not counted: what
// only the emulator has (the poisoned tails after each allocation, strict mode's quarantine of
// freed memory), the CUDA context, cuBLASLt's handle and the driver's reservations (a few hundred
// MiB on a real card, not modelled: judge a fit with some headroom).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "backend/cuda/emu/state.h"
#include "core/bytes.h"

namespace tda::emu {

constexpr size_t kDevicePageBytes = size_t(2) << 20;
constexpr size_t kDefaultDeviceBytes = size_t(80) << 30;  // an 80 GB card unless told otherwise

inline size_t device_footprint(size_t bytes) {
  return (bytes + kDevicePageBytes - 1) / kDevicePageBytes * kDevicePageBytes;
}

struct MemoryStats {
  size_t cap = 0;   // what cudaMemGetInfo calls total
  size_t live = 0;  // footprint of the allocations alive now (and reservations)
  size_t peak = 0;  // the most `live` has been since the last reset_memory_peak()
  uint64_t allocations = 0, frees = 0;
  std::map<std::string, size_t> at_peak;  // footprint by allocation name at that peak
};

namespace detail {

// TDA_EMU_DEVICE_GB: GiB of device memory, a positive number (40, 80, 79.1). A malformed value
// is a one-line error and exit, like any bad setting.
inline size_t cap_from_env() {
  const char* e = std::getenv("TDA_EMU_DEVICE_GB");
  if (!e || !*e) return kDefaultDeviceBytes;
  char* end = nullptr;
  const double gib = std::strtod(e, &end);
  if (end == e || *end || !(gib > 0) || gib > 1e6) {
    std::fprintf(stderr,
                 "error: TDA_EMU_DEVICE_GB=%s: expected a positive number of GiB (e.g. 40)\n", e);
    std::exit(2);
  }
  return size_t(gib * double(size_t(1) << 30));
}

// Caller holds runtime().mu (as for every function below). The environment is read at the first
// question, not at static initialisation.
inline size_t capacity(DeviceMemory& m) {
  if (m.cap == 0) m.cap = cap_from_env();
  return m.cap;
}

// The name the next cudaMalloc on this thread is for (AllocationName sets it).
inline thread_local std::string tl_pending_name;
inline std::string pending_name() {
  return tl_pending_name.empty() ? std::string("unnamed") : tl_pending_name;
}

inline void note_peak(RuntimeState& rt) {
  DeviceMemory& m = rt.memory;
  if (m.live < m.peak) return;
  m.peak = m.live;
  m.at_peak = m.reserved;
  for (const auto& [base, r] : rt.live) m.at_peak[r.name] += device_footprint(r.bytes);
}

// Whether `bytes` more fit under the cap; if not, *why says what did not fit.
inline bool admits(RuntimeState& rt, size_t bytes, std::string* why) {
  DeviceMemory& m = rt.memory;
  const size_t need = device_footprint(bytes), cap = capacity(m);
  if (need <= cap && m.live <= cap - need) return true;
  *why = "out of memory: " +
         (tl_pending_name.empty() ? std::string("an allocation") : tl_pending_name) + " of " +
         size_text(bytes) + " does not fit: " + size_text(m.live) + " of " + size_text(cap) +
         " in use (emulated device, TDA_EMU_DEVICE_GB)";
  return false;
}

// memory.h, once `r` is in (or has left) the table of live allocations.
inline void count_allocation(RuntimeState& rt, const AllocRecord& r) {
  rt.memory.live += device_footprint(r.bytes);
  ++rt.memory.allocations;
  note_peak(rt);
}
inline void count_free(RuntimeState& rt, const AllocRecord& r) {
  rt.memory.live -= device_footprint(r.bytes);
  ++rt.memory.frees;
}

}  // namespace detail

// Names the allocations made on this thread in its scope (nested scopes restore the outer name).
class AllocationName {
 public:
  explicit AllocationName(std::string name) : saved_(std::move(detail::tl_pending_name)) {
    detail::tl_pending_name = std::move(name);
  }
  ~AllocationName() { detail::tl_pending_name = std::move(saved_); }
  AllocationName(const AllocationName&) = delete;
  AllocationName& operator=(const AllocationName&) = delete;

 private:
  std::string saved_;
};

// Device memory the emulator does not allocate but a GPU would (cuBLASLt's workspace), under the
// current AllocationName, kept for the life of the process (cudaDeviceReset included: it stands
// for the backend's static cuBLASLt state). False, with *why, past the cap.
inline bool reserve_device_memory(size_t bytes, std::string* why) {
  detail::RuntimeState& rt = detail::runtime();
  std::lock_guard<std::mutex> lock(rt.mu);
  if (!detail::admits(rt, bytes, why)) return false;
  rt.memory.reserved[detail::pending_name()] += device_footprint(bytes);
  rt.memory.live += device_footprint(bytes);
  detail::note_peak(rt);
  return true;
}

// The capacity cudaMalloc fails past and cudaMemGetInfo reports (0: TDA_EMU_DEVICE_GB, or 80 GiB).
inline void set_device_memory_cap(size_t bytes) {
  std::lock_guard<std::mutex> lock(detail::runtime().mu);
  detail::runtime().memory.cap = bytes ? bytes : detail::cap_from_env();
}
inline MemoryStats memory_stats() {
  detail::RuntimeState& rt = detail::runtime();
  std::lock_guard<std::mutex> lock(rt.mu);
  const detail::DeviceMemory& m = rt.memory;
  return MemoryStats{
      detail::capacity(rt.memory), m.live, m.peak, m.allocations, m.frees, m.at_peak};
}
inline void reset_memory_peak() {
  detail::RuntimeState& rt = detail::runtime();
  std::lock_guard<std::mutex> lock(rt.mu);
  rt.memory.peak = 0;
  detail::note_peak(rt);
}

}  // namespace tda::emu
