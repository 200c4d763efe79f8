// The CUDA runtime API subset the backend uses, served from host memory. Declarations come from
// the toolkit's cuda_runtime_api.h, so a call that would not compile against the real runtime does
// not compile here either. Streams execute synchronously: every call completes before it returns.
#pragma once

#include <cuda_runtime_api.h>

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "backend/cuda/emu/budget.h"
#include "backend/cuda/emu/dry_run.h"

struct CUstream_st {
  unsigned flags = 0;
};
struct CUevent_st {
  std::chrono::steady_clock::time_point when;
  bool recorded = false;
};

namespace tda::emu {

namespace detail {
struct RuntimeState {
  std::mutex mu;
  std::unordered_map<void*, size_t> device_allocs;        // device pointer -> bytes
  std::unordered_map<const void*, int> max_dynamic_smem;  // kernel -> opt-in limit
  size_t device_bytes = 0;
  // Host-access guard (see DeviceAccess below).
  bool guard = [] {
    const char* e = std::getenv("TDA_EMU_GUARD");
    return e && *e && std::strcmp(e, "0") != 0;
  }();
  std::unordered_map<void*, size_t> guarded;  // mmap'd allocations -> mapped bytes
  int access_depth = 0;                       // > 0 while the emulator touches device memory
};
inline RuntimeState& runtime() {
  static RuntimeState s;
  return s;
}

// Caller holds runtime().mu.
inline void protect_all(int prot) {
  for (const auto& [p, bytes] : runtime().guarded)
    if (mprotect(p, bytes, prot) != 0) {
      std::perror("tda emu: mprotect");
      std::abort();
    }
}
inline thread_local cudaError_t tl_last_error = cudaSuccess;
// A failed kernel, reported by the synchronising calls as on the GPU (where it would be an
// asynchronous error). Unlike the GPU's sticky errors, cudaGetLastError clears it, so that a
// test can provoke a failure and go on.
inline thread_local cudaError_t tl_kernel_error = cudaSuccess;
inline thread_local std::string tl_last_message;

inline cudaError_t record(cudaError_t err, const std::string& message = {}) {
  if (err != cudaSuccess) {
    tl_last_error = err;
    tl_last_message = message;
  }
  return err;
}

// Real device memory starts with whatever the previous owner left; all-ones bytes read as NaN
// (float, bf16) or -1 (ints), so a kernel that reads memory nobody wrote shows it in its output.
constexpr unsigned char kUninitialisedByte = 0xFF;
constexpr size_t kDeviceAlignment = 256;  // cudaMalloc guarantees at least 256-byte alignment
constexpr size_t kDefaultDynamicSmem = 48 * 1024;  // larger needs cudaFuncSetAttribute, as on HW
constexpr size_t kMaxDynamicSmem = 227 * 1024;     // sm_90 opt-in maximum per block
}  // namespace detail

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

// The message of the last failed launch (deadlock, bad warp mask, ...): cudaGetErrorString can
// only name the code.
inline const std::string& last_error_message() {
  return detail::tl_last_message;
}

}  // namespace tda::emu

extern "C" {

inline cudaError_t cudaGetLastError(void) {
  cudaError_t e = tda::emu::detail::tl_last_error;
  tda::emu::detail::tl_last_error = cudaSuccess;
  tda::emu::detail::tl_kernel_error = cudaSuccess;
  return e;
}
inline cudaError_t cudaPeekAtLastError(void) {
  return tda::emu::detail::tl_last_error;
}

inline const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorNotSupported:
      return "cudaErrorNotSupported";
    default:
      return "cudaErrorUnknown";
  }
}

inline const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
    case cudaErrorNotSupported:
      return "operation not supported";
    default:
      return "unknown error (emulated runtime)";
  }
}

inline cudaError_t cudaGetDevice(int* device) {
  if (!device) return tda::emu::detail::record(cudaErrorInvalidValue);
  *device = 0;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceSynchronize(void) {
  tda::emu::detail::note_sync();
  return tda::emu::detail::tl_kernel_error;
}

inline cudaError_t cudaMalloc(void** ptr, size_t size) {
  using namespace tda::emu::detail;
  if (!ptr) return record(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (size == 0) return cudaSuccess;
  // The device memory cap and the dry run (budget.h, dry_run.h).
  std::string why;
  if (tda::emu::dry_run()) {
    const cudaError_t e = dry_malloc(ptr, size, &why);
    return e == cudaSuccess ? e : record(e, why);
  }
  if (!budget_admits(size, &why)) return record(cudaErrorMemoryAllocation, why);
  size_t rounded = (size + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
  std::lock_guard<std::mutex> lock(runtime().mu);
  void* p = nullptr;
  if (runtime().guard) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    rounded = (size + page - 1) / page * page;
    p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return record(cudaErrorMemoryAllocation);
    std::memset(p, kUninitialisedByte, rounded);
    if (runtime().access_depth == 0) mprotect(p, rounded, PROT_NONE);
    runtime().guarded[p] = rounded;
  } else {
    p = std::aligned_alloc(kDeviceAlignment, rounded);
    if (!p) return record(cudaErrorMemoryAllocation);
    std::memset(p, kUninitialisedByte, rounded);
  }
  runtime().device_allocs[p] = rounded;
  runtime().device_bytes += rounded;
  budget_add(p, size);
  *ptr = p;
  return cudaSuccess;
}

inline cudaError_t cudaFree(void* ptr) {
  using namespace tda::emu::detail;
  if (!ptr) return cudaSuccess;
  if (dry_free(ptr)) return cudaSuccess;
  std::lock_guard<std::mutex> lock(runtime().mu);
  auto it = runtime().device_allocs.find(ptr);
  if (it == runtime().device_allocs.end()) return record(cudaErrorInvalidValue);
  budget_remove(ptr);
  runtime().device_bytes -= it->second;
  runtime().device_allocs.erase(it);
  auto g = runtime().guarded.find(ptr);
  if (g != runtime().guarded.end()) {
    munmap(ptr, g->second);
    runtime().guarded.erase(g);
  } else {
    std::free(ptr);
  }
  return cudaSuccess;
}

inline cudaError_t cudaMallocHost(void** ptr, size_t size) {
  if (!ptr) return tda::emu::detail::record(cudaErrorInvalidValue);
  *ptr = std::malloc(size ? size : 1);
  return *ptr ? cudaSuccess : tda::emu::detail::record(cudaErrorMemoryAllocation);
}
inline cudaError_t cudaFreeHost(void* ptr) {
  std::free(ptr);
  return cudaSuccess;
}

inline cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  const tda::emu::MemoryStats m = tda::emu::memory_stats();  // budget.h: the capped device
  if (total_bytes) *total_bytes = m.cap;
  if (free_bytes) *free_bytes = m.live < m.cap ? m.cap - m.live : 0;
  return cudaSuccess;
}

inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
  if (count == 0) return cudaSuccess;
  if (!dst || !src || static_cast<int>(kind) < 0 || static_cast<int>(kind) > 4)
    return tda::emu::detail::record(cudaErrorInvalidValue);
  if (tda::emu::detail::memcpy_hook(dst, src, count, kind)) return cudaSuccess;  // dry_run.h
  tda::emu::DeviceAccess access;
  std::memmove(dst, src, count);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count,
                                   enum cudaMemcpyKind kind, cudaStream_t /*stream*/) {
  return cudaMemcpy(dst, src, count, kind);
}
inline cudaError_t cudaMemset(void* ptr, int value, size_t count) {
  if (count == 0) return cudaSuccess;
  if (!ptr) return tda::emu::detail::record(cudaErrorInvalidValue);
  if (tda::emu::detail::memset_hook(ptr)) return cudaSuccess;  // dry_run.h
  tda::emu::DeviceAccess access;
  std::memset(ptr, value, count);
  return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t /*stream*/) {
  return cudaMemset(ptr, value, count);
}

inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  if (!stream) return tda::emu::detail::record(cudaErrorInvalidValue);
  *stream = new CUstream_st{flags};
  return cudaSuccess;
}
inline cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, 0);
}
inline cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream) return tda::emu::detail::record(cudaErrorInvalidResourceHandle);
  delete stream;
  return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t /*stream*/) {
  tda::emu::detail::note_sync();
  return tda::emu::detail::tl_kernel_error;
}
inline cudaError_t cudaStreamWaitEvent(cudaStream_t /*stream*/, cudaEvent_t event,
                                       unsigned int /*flags*/) {
  return event ? cudaSuccess : tda::emu::detail::record(cudaErrorInvalidResourceHandle);
}

inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int /*flags*/) {
  if (!event) return tda::emu::detail::record(cudaErrorInvalidValue);
  *event = new CUevent_st{};
  return cudaSuccess;
}
inline cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, 0);
}
inline cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event) return tda::emu::detail::record(cudaErrorInvalidResourceHandle);
  delete event;
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t /*stream*/) {
  if (!event) return tda::emu::detail::record(cudaErrorInvalidResourceHandle);
  event->when = std::chrono::steady_clock::now();
  event->recorded = true;
  return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!event) return tda::emu::detail::record(cudaErrorInvalidResourceHandle);
  tda::emu::detail::note_sync();
  return tda::emu::detail::tl_kernel_error;
}
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms) return tda::emu::detail::record(cudaErrorInvalidValue);
  if (!start || !end || !start->recorded || !end->recorded)
    return tda::emu::detail::record(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return cudaSuccess;
}

inline cudaError_t cudaFuncSetAttribute(const void* func, enum cudaFuncAttribute attr, int value) {
  using namespace tda::emu::detail;
  if (!func) return record(cudaErrorInvalidValue);
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || static_cast<size_t>(value) > kMaxDynamicSmem)
      return record(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lock(runtime().mu);
    runtime().max_dynamic_smem[func] = value;
  }
  return cudaSuccess;
}

}  // extern "C"

// Devices, driver and runtime versions (configurable for the start-up tests), stream queries.
#include "backend/cuda/emu/queries.h"

// The C++ conveniences of cuda_runtime.h (typed pointers, kernels instead of const void*).
template <class T>
inline cudaError_t cudaMalloc(T** ptr, size_t size) {
  return ::cudaMalloc(reinterpret_cast<void**>(ptr), size);
}
template <class T>
inline cudaError_t cudaMallocHost(T** ptr, size_t size) {
  return ::cudaMallocHost(reinterpret_cast<void**>(ptr), size);
}
template <class T>
inline cudaError_t cudaFuncSetAttribute(T* entry, enum cudaFuncAttribute attr, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(entry), attr, value);
}
