// Emulated device memory as a GPU would count it: a capacity (TDA_EMU_DEVICE_GB, or
// set_device_memory_cap), live and peak bytes, and a registry of the allocations with the name of
// what each one holds, so that an emulated run fails with cudaErrorMemoryAllocation where a GPU of
// that size would, and can say which buffers filled the memory. runtime.h calls in here from
// cudaMalloc/cudaFree/cudaMemGetInfo; the backend names its allocations (AllocationName) and
// reserves the cuBLASLt workspace it would allocate on a GPU (reserve_device_memory).
//
// What is counted: every allocation rounded up to whole 2 MiB pages, the page size the CUDA
// driver maps device memory with (an upper bound for small buffers, which the driver may pack
// into one page; exact for the large ones that decide whether a model fits). Not counted: the
// CUDA context, cuBLASLt's handle and the driver's reservations (a few hundred MiB on a real
// card, not modelled: judge a fit with some headroom).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

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

struct Allocation {
  size_t bytes = 0, footprint = 0;
  std::string name;
  bool dry = false;  // dry-run memory (dry_run.h): reserved address space, never backed
};

struct Budget {
  std::mutex mu;
  size_t cap = cap_from_env();
  size_t live = 0, peak = 0;
  uint64_t allocations = 0, frees = 0;
  std::map<uintptr_t, Allocation> allocs;  // by start address
  std::map<std::string, size_t> reserved;  // address-less reservations by name
  std::map<std::string, size_t> at_peak;
};
inline Budget& budget() {
  static Budget b;
  return b;
}

// The name the next cudaMalloc on this thread is for (AllocationName sets it).
inline thread_local std::string tl_pending_name;

// Caller holds budget().mu.
inline void note_peak(Budget& b) {
  if (b.live < b.peak) return;
  b.peak = b.live;
  b.at_peak = b.reserved;
  for (const auto& [p, a] : b.allocs) b.at_peak[a.name] += a.footprint;
}

// Whether `bytes` more fit under the cap; if not, *why says what did not fit. Caller holds mu.
inline bool admits(Budget& b, size_t bytes, const std::string& name, std::string* why) {
  const size_t need = device_footprint(bytes);
  if (need <= b.cap && b.live <= b.cap - need) return true;
  *why = "out of memory: " + (name.empty() ? std::string("an allocation") : name) + " of " +
         size_text(bytes) + " does not fit: " + size_text(b.live) + " of " + size_text(b.cap) +
         " in use (emulated device, TDA_EMU_DEVICE_GB)";
  return false;
}

// Allocation bookkeeping for runtime.h's cudaMalloc (admit first, then add) and cudaFree.
inline bool budget_admits(size_t bytes, std::string* why) {
  Budget& b = budget();
  std::lock_guard<std::mutex> lock(b.mu);
  return admits(b, bytes, tl_pending_name, why);
}
inline void budget_add(void* p, size_t bytes, bool dry = false) {
  Budget& b = budget();
  std::lock_guard<std::mutex> lock(b.mu);
  Allocation a{bytes, device_footprint(bytes),
               tl_pending_name.empty() ? "unnamed" : tl_pending_name, dry};
  b.live += a.footprint;
  ++b.allocations;
  b.allocs[reinterpret_cast<uintptr_t>(p)] = std::move(a);
  note_peak(b);
}
inline void budget_remove(void* p) {
  Budget& b = budget();
  std::lock_guard<std::mutex> lock(b.mu);
  auto it = b.allocs.find(reinterpret_cast<uintptr_t>(p));
  if (it == b.allocs.end()) return;
  b.live -= it->second.footprint;
  ++b.frees;
  b.allocs.erase(it);
}

// The allocation holding [p, p + bytes), or null. Caller holds budget().mu.
inline const Allocation* holding(Budget& b, const void* p, size_t bytes, uintptr_t* start) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = b.allocs.upper_bound(a);
  if (it == b.allocs.begin()) return nullptr;
  --it;
  if (a + bytes > it->first + it->second.bytes) return nullptr;
  if (start) *start = it->first;
  return &it->second;
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
// current AllocationName, kept for the life of the process. False, with *why, past the cap.
inline bool reserve_device_memory(size_t bytes, std::string* why) {
  detail::Budget& b = detail::budget();
  std::lock_guard<std::mutex> lock(b.mu);
  if (!detail::admits(b, bytes, detail::tl_pending_name, why)) return false;
  b.reserved[detail::tl_pending_name] += device_footprint(bytes);
  b.live += device_footprint(bytes);
  detail::note_peak(b);
  return true;
}

// The capacity cudaMalloc fails past and cudaMemGetInfo reports (0: TDA_EMU_DEVICE_GB, or 80 GiB).
inline void set_device_memory_cap(size_t bytes) {
  detail::Budget& b = detail::budget();
  std::lock_guard<std::mutex> lock(b.mu);
  b.cap = bytes ? bytes : detail::cap_from_env();
}
inline MemoryStats memory_stats() {
  detail::Budget& b = detail::budget();
  std::lock_guard<std::mutex> lock(b.mu);
  return MemoryStats{b.cap, b.live, b.peak, b.allocations, b.frees, b.at_peak};
}
inline void reset_memory_peak() {
  detail::Budget& b = detail::budget();
  std::lock_guard<std::mutex> lock(b.mu);
  b.peak = 0;
  detail::note_peak(b);
}
// Whether [p, p + bytes) lies inside one live allocation (the dry run's GEMM operand check).
inline bool is_device_range(const void* p, size_t bytes) {
  detail::Budget& b = detail::budget();
  std::lock_guard<std::mutex> lock(b.mu);
  return detail::holding(b, p, bytes, nullptr) != nullptr;
}

}  // namespace tda::emu
