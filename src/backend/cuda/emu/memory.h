// Device memory of the emulator. An allocation is host memory, 256-byte aligned as cudaMalloc's,
// exactly as large as asked, followed by a poisoned tail (at least kTailBytes): strict mode
// checks the tails after every kernel, memcpy, memset and emulated GEMM, so a write past the end
// is reported with the allocation and the operation. In a dry run (emu/dry_run.h) an allocation
// is address space only (PROT_NONE, MAP_NORESERVE): it sits in the same table, so every lookup
// (strict mode's pointer, copy and GEMM checks) sees it, but nothing reads or writes it. Every
// allocation is counted against the device's capacity (emu/budget.h). Freed allocations stay
// reserved for a while in strict mode (a quarantine), so a use after cudaFree is recognised by
// its address. find_allocation() is the one lookup other code uses (NCCL stand-in).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/cuda/emu/budget.h"
#include "backend/cuda/emu/state.h"

namespace tda::emu {

// A live device allocation: its first byte and the size cudaMalloc was asked for.
struct Allocation {
  const void* base = nullptr;
  size_t bytes = 0;
  explicit operator bool() const { return base != nullptr; }
};

namespace detail {

constexpr size_t kTailBytes = 256;  // at least this many poisoned bytes after each allocation
// The tail's bytes by address parity: 0x7FC1 per 16 bits, a NaN as fp32 and as bf16, and not
// the 0xFF of unwritten memory, so a stray write of either is seen.
constexpr unsigned char kTailPoison[2] = {0xC1, 0x7F};
constexpr size_t kQuarantineBytes = size_t{256} << 20;

inline std::string hex(uintptr_t p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIxPTR, p);
  return buf;
}

inline void poison_tail(uintptr_t base, const AllocRecord& r) {
  auto* p = reinterpret_cast<unsigned char*>(base);
  for (size_t i = r.bytes; i < r.reserved; ++i) p[i] = kTailPoison[(base + i) & 1];
}

// Caller holds runtime().mu. Every call sets `prot` on all live guarded mappings (dry-run memory
// stays PROT_NONE).
inline void protect_all(int prot) {
  for (const auto& [base, r] : runtime().live)
    if (r.mapped && !r.dry && mprotect(reinterpret_cast<void*>(base), r.reserved, prot) != 0) {
      std::perror("tda emu: mprotect");
      std::abort();
    }
}

// Caller holds runtime().mu: the allocation holding p (base <= p < base + reserved) in `table`.
inline const std::pair<const uintptr_t, AllocRecord>* find_in(
    const std::map<uintptr_t, AllocRecord>& table, uintptr_t p) {
  auto it = table.upper_bound(p);
  if (it == table.begin()) return nullptr;
  --it;
  return p < it->first + it->second.reserved ? &*it : nullptr;
}

inline void unmap(uintptr_t base, const AllocRecord& r) {
  if (r.mapped)
    munmap(reinterpret_cast<void*>(base), r.reserved);
  else
    std::free(reinterpret_cast<void*>(base));
}

// Caller holds runtime().mu. nullptr, with *why, past the device's capacity (emu/budget.h) or
// when the host is out of memory (a dry run: of address space).
inline void* allocate(size_t n, bool dry, std::string* why) {
  RuntimeState& rt = runtime();
  if (!admits(rt, n, why)) return nullptr;
  AllocRecord r;
  r.bytes = n;
  r.name = pending_name();
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  void* p = nullptr;
  if (dry) {  // no tail: nothing may touch it
    r.reserved = (n + page - 1) / page * page;
    r.mapped = r.dry = true;
    p = mmap(nullptr, r.reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  } else if (rt.guard) {
    r.reserved = (n + kTailBytes + page - 1) / page * page;
    r.mapped = true;
    p = mmap(nullptr, r.reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  } else {
    r.reserved = (n + kTailBytes + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
    p = std::aligned_alloc(kDeviceAlignment, r.reserved);
  }
  if (p == MAP_FAILED || !p) {
    *why = "cudaMalloc(" + std::to_string(n) + " bytes): out of host " +
           (dry ? "address space (dry run)" : "memory");
    return nullptr;
  }
  const auto base = reinterpret_cast<uintptr_t>(p);
  if (!dry) {
    std::memset(p, kUninitialisedByte, n);
    poison_tail(base, r);
    if (r.mapped && rt.access_depth == 0) mprotect(p, r.reserved, PROT_NONE);
  }
  const AllocRecord& added = rt.live[base] = std::move(r);
  count_allocation(rt, added);  // after adding it: the peak's breakdown includes it
  return p;
}

// Caller holds runtime().mu. False (and *why) when p is not the start of a live allocation.
inline bool release(void* ptr, std::string* why) {
  RuntimeState& rt = runtime();
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  auto it = rt.live.find(p);
  if (it == rt.live.end()) {
    if (rt.freed.count(p))
      *why = "cudaFree(" + hex(p) + "): freed twice";
    else if (find_in(rt.live, p))
      *why = "cudaFree(" + hex(p) + "): not the start of its allocation";
    else
      *why = "cudaFree(" + hex(p) + "): not a device allocation";
    return false;
  }
  AllocRecord r = std::move(it->second);
  rt.live.erase(it);
  count_free(rt, r);
  if (!strict()) {
    unmap(p, r);
    return true;
  }
  // Quarantine: the address range stays reserved (guarded mappings stay PROT_NONE), so a later
  // use of this pointer is told apart from memory someone else allocated since.
  if (r.mapped) mprotect(ptr, r.reserved, PROT_NONE);
  rt.freed[p] = std::move(r);
  rt.freed_order.push_back(p);
  rt.freed_bytes += rt.freed[p].reserved;
  while (rt.freed_bytes > kQuarantineBytes && !rt.freed_order.empty()) {
    const uintptr_t old = rt.freed_order.front();
    rt.freed_order.pop_front();
    auto f = rt.freed.find(old);
    rt.freed_bytes -= f->second.reserved;
    unmap(old, f->second);
    rt.freed.erase(f);
  }
  return true;
}

// Caller holds runtime().mu: cudaDeviceReset's end of every allocation (reservations stay:
// emu/budget.h).
inline void release_all() {
  RuntimeState& rt = runtime();
  for (const auto& [base, r] : rt.live) {
    unmap(base, r);
    count_free(rt, r);
  }
  for (const auto& [base, r] : rt.freed) unmap(base, r);
  rt.live.clear();
  rt.freed.clear();
  rt.freed_order.clear();
  rt.freed_bytes = 0;
}

// Caller holds runtime().mu. Empty when [p, p + bytes) lies inside one live allocation (bytes 0:
// p may also be its end); else what p is, for an error message.
inline std::string describe_range_locked(const void* ptr, size_t bytes) {
  RuntimeState& rt = runtime();
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  const auto* a = find_in(rt.live, p);
  if (!a && bytes == 0 && p > 0) a = find_in(rt.live, p - 1);  // an empty view at the end
  if (a) {
    const uintptr_t end = a->first + a->second.bytes;
    if (p <= end && bytes <= end - p) return {};
    return hex(p) + " + " + std::to_string(bytes) + " bytes runs " +
           std::to_string(p + bytes - end) + " bytes past the end of a " +
           std::to_string(a->second.bytes) + "-byte allocation at " + hex(a->first);
  }
  if (const auto* f = find_in(rt.freed, p))
    return hex(p) + " is in a " + std::to_string(f->second.bytes) + "-byte allocation at " +
           hex(f->first) + " that was freed by cudaFree (use after free)";
  return hex(p) + " is not device memory (a host pointer, or not from cudaMalloc)";
}

// Caller holds runtime().mu. Empty when every live allocation's tail is intact; else a message
// naming `who` and the first damaged allocation (whose tail is re-poisoned, so it is reported
// once).
inline std::string check_tails_locked(const std::string& who) {
  for (auto& [base, r] : runtime().live) {
    if (r.dry) continue;  // no tail, and nothing writes it
    const auto* p = reinterpret_cast<const unsigned char*>(base);
    for (size_t i = r.bytes; i < r.reserved; ++i)
      if (p[i] != kTailPoison[(base + i) & 1]) {
        size_t last = i;
        for (size_t j = i; j < r.reserved; ++j)
          if (p[j] != kTailPoison[(base + j) & 1]) last = j;
        poison_tail(base, r);
        return who + " wrote past the end of a " + std::to_string(r.bytes) +
               "-byte allocation at " + hex(base) + " (bytes " + std::to_string(i - r.bytes) +
               " to " + std::to_string(last - r.bytes) + " after its end)";
      }
  }
  return {};
}

}  // namespace detail

// The live allocation holding p (base <= p < base + bytes), or an empty Allocation.
inline Allocation find_allocation(const void* p) {
  std::lock_guard<std::mutex> lock(detail::runtime().mu);
  const auto* a = detail::find_in(detail::runtime().live, reinterpret_cast<uintptr_t>(p));
  if (!a || reinterpret_cast<uintptr_t>(p) >= a->first + a->second.bytes) return {};
  return {reinterpret_cast<const void*>(a->first), a->second.bytes};
}

// Whether p lies in a live allocation or in one freed but still in quarantine.
inline bool device_address(const void* p) {
  std::lock_guard<std::mutex> lock(detail::runtime().mu);
  const auto a = reinterpret_cast<uintptr_t>(p);
  return detail::find_in(detail::runtime().live, a) || detail::find_in(detail::runtime().freed, a);
}

// Strict mode's range check: empty when [p, p + bytes) lies inside one live allocation, else a
// description of p (host pointer, freed, past the end).
inline std::string describe_range(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(detail::runtime().mu);
  return detail::describe_range_locked(p, bytes);
}

// Host-access guard. On a GPU, host code that dereferences a cudaMalloc pointer faults; here
// device memory is host memory, so such a bug would pass silently. With the guard on
// (set_host_access_guard(true) or TDA_EMU_GUARD=1), cudaMalloc returns page-aligned mappings
// that stay PROT_NONE except inside a DeviceAccess scope, which the emulator opens around
// kernel grids, cudaMemcpy/cudaMemset and the emulated cuBLAS calls: any other host access to
// device memory dies with SIGSEGV at the offending instruction. It applies to allocations made
// while it is on. Off by default: AddressSanitizer cannot see overflows inside whole pages.
inline void set_host_access_guard(bool on) {
  std::lock_guard<std::mutex> lock(detail::runtime().mu);
  detail::runtime().guard = on;
}
inline bool host_access_guard() {
  std::lock_guard<std::mutex> lock(detail::runtime().mu);
  return detail::runtime().guard;
}
class DeviceAccess {
 public:
  DeviceAccess() {
    std::lock_guard<std::mutex> lock(detail::runtime().mu);
    if (detail::runtime().access_depth++ == 0) detail::protect_all(PROT_READ | PROT_WRITE);
  }
  ~DeviceAccess() {
    std::lock_guard<std::mutex> lock(detail::runtime().mu);
    if (--detail::runtime().access_depth == 0) detail::protect_all(PROT_NONE);
  }
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;
};

// Strict mode, after an operation that may write device memory: a write into a tail is a fault
// (sticky cudaErrorIllegalAddress) naming `who`. Returns cudaSuccess or that error.
inline cudaError_t check_tails(const std::string& who) {
  if (!strict()) return cudaSuccess;
  std::string damage;
  {
    DeviceAccess access;  // the tails of guarded allocations are PROT_NONE outside it
    std::lock_guard<std::mutex> lock(detail::runtime().mu);
    damage = detail::check_tails_locked(who);
  }
  return damage.empty() ? cudaSuccess : detail::fault(cudaErrorIllegalAddress, damage);
}

}  // namespace tda::emu
