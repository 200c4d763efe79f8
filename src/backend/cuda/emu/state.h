// Process state of the emulated CUDA runtime: its lock, the one table of device allocations
// (emu/memory.h allocates and looks up, emu/budget.h counts them against the device's capacity),
// the errors (each thread's last error, the context's sticky error) and the strict-mode switch.
// See docs/emulator.md.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

namespace tda::emu {

namespace detail {

inline bool env_flag(const char* name) {
  const char* e = std::getenv(name);
  return e && *e && std::strcmp(e, "0") != 0;
}

// Real device memory starts with whatever the previous owner left; all-ones bytes read as NaN
// (float, bf16) or -1 (ints), so a kernel that reads memory nobody wrote shows it in its output.
constexpr unsigned char kUninitialisedByte = 0xFF;
constexpr size_t kDeviceAlignment = 256;  // cudaMalloc guarantees at least 256-byte alignment
constexpr size_t kDefaultDynamicSmem = 48 * 1024;  // larger needs cudaFuncSetAttribute, as on HW
constexpr size_t kMaxDynamicSmem = 227 * 1024;     // sm_90 opt-in maximum per block

// One cudaMalloc: `bytes` usable (what was asked), then a poisoned tail up to `reserved` (none
// for dry-run memory, which nothing may touch).
struct AllocRecord {
  size_t bytes = 0;
  size_t reserved = 0;
  bool mapped = false;  // an mmap (host-access guard, dry run), else aligned_alloc
  bool dry = false;     // dry run (emu/dry_run.h): PROT_NONE address space, never backed
  std::string name;     // what it holds (AllocationName, emu/budget.h); "unnamed" if not said
};

// Device memory as a GPU would count it (emu/budget.h): the capacity cudaMalloc fails past, the
// footprint of the live allocations and reservations, its peak and what made up the peak.
struct DeviceMemory {
  size_t cap = 0;   // 0 until first asked: TDA_EMU_DEVICE_GB, or 80 GiB
  size_t live = 0;  // footprint of `RuntimeState::live` plus `reserved`
  size_t peak = 0;
  uint64_t allocations = 0, frees = 0;
  std::map<std::string, size_t> reserved;  // address-less reservations (cuBLASLt workspace)
  std::map<std::string, size_t> at_peak;   // footprint by name at the peak
};

struct RuntimeState {
  std::mutex mu;
  std::map<uintptr_t, AllocRecord> live;   // base -> allocation
  std::map<uintptr_t, AllocRecord> freed;  // strict mode: freed allocations kept back a while
  std::deque<uintptr_t> freed_order;       // oldest first
  size_t freed_bytes = 0;
  DeviceMemory memory;
  std::unordered_map<const void*, int> max_dynamic_smem;  // kernel -> opt-in limit
  // Host-access guard (see DeviceAccess in emu/memory.h).
  bool guard = env_flag("TDA_EMU_GUARD");
  int access_depth = 0;  // > 0 while the emulator touches device memory
  // The context's sticky error: after a kernel fault every call fails with it until
  // cudaDeviceReset, as on a GPU (the context is lost). 0: none.
  std::atomic<int> sticky{0};
  std::string sticky_message;  // guarded by mu
};
// Never destroyed, as a GPU context lives until the process ends: a static object's destructor
// would drop the tables while device memory (live or quarantined) is still mapped, which
// LeakSanitizer reports as leaks, and threads still running at exit (NCCL stand-in workers)
// would find it gone.
inline RuntimeState& runtime() {
  static RuntimeState* s = new RuntimeState;
  return *s;
}

// The last error of this thread (cudaGetLastError), and the message recorded with the last
// failure (`message_code` is its error, so that a caller can tell the message is its own).
inline thread_local cudaError_t tl_last_error = cudaSuccess;
inline thread_local cudaError_t tl_message_code = cudaSuccess;
inline thread_local std::string tl_last_message;

inline cudaError_t record(cudaError_t err, const std::string& message = {}) {
  if (err != cudaSuccess) {
    tl_last_error = err;
    tl_message_code = err;
    tl_last_message = message;
  }
  return err;
}

inline cudaError_t sticky_error() {
  return static_cast<cudaError_t>(runtime().sticky.load(std::memory_order_acquire));
}

// What every runtime call does first: fail with the sticky error, if there is one.
inline cudaError_t fail_if_sticky() {
  const cudaError_t e = sticky_error();
  if (e == cudaSuccess) return e;
  std::string message;
  {
    std::lock_guard<std::mutex> lock(runtime().mu);
    message = runtime().sticky_message;
  }
  return record(e, message);
}

// A fault in device code (a kernel, or the emulated cuBLAS): the error becomes sticky.
inline cudaError_t fault(cudaError_t err, const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(runtime().mu);
    int none = 0;
    if (runtime().sticky.compare_exchange_strong(none, static_cast<int>(err)))
      runtime().sticky_message = message;
  }
  return record(err, message);
}

}  // namespace detail

// Strict mode (docs/emulator.md): launch resources against the nvcc build's table, pointer
// arguments, memcpy directions and GEMM operands against the live allocations, writes past an
// allocation or the dynamic shared memory. TDA_EMU_STRICT=1 or set_strict(true); the test suite
// turns it on for every test (tests/main.cpp).
namespace detail {
// -1 until first asked: the environment is read then, not at static initialisation (a test
// main sets TDA_EMU_STRICT before running anything).
inline std::atomic<int>& strict_flag() {
  static std::atomic<int> flag{-1};
  return flag;
}
}  // namespace detail
inline bool strict() {
  int v = detail::strict_flag().load(std::memory_order_relaxed);
  if (v < 0) {
    v = detail::env_flag("TDA_EMU_STRICT") ? 1 : 0;
    detail::strict_flag().store(v, std::memory_order_relaxed);
  }
  return v != 0;
}
inline void set_strict(bool on) {
  detail::strict_flag().store(on ? 1 : 0, std::memory_order_relaxed);
}

// The message of the last failed call on this thread (deadlock, bad warp mask, strict-mode
// finding, ...): cudaGetErrorString can only name the code.
inline const std::string& last_error_message() {
  return detail::tl_last_message;
}
// The message that came with `err`, if this thread's last failure was `err` (else empty).
inline std::string error_detail(cudaError_t err) {
  return detail::tl_message_code == err ? detail::tl_last_message : std::string();
}

}  // namespace tda::emu
