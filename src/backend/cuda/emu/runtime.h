// The CUDA runtime API subset the backend uses, served from host memory. Declarations come from
// the toolkit's cuda_runtime_api.h, so a call that would not compile against the real runtime does
// not compile here either. Streams execute synchronously: every call completes before it returns.
// After a kernel fault the context's error is sticky: every call fails with it (and
// cudaGetLastError does not clear it) until cudaDeviceReset, as on a GPU.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "backend/cuda/emu/budget.h"
#include "backend/cuda/emu/dry_run.h"
#include "backend/cuda/emu/memory.h"
#include "backend/cuda/emu/state.h"

struct CUstream_st {
  unsigned flags = 0;
};
struct CUevent_st {
  std::chrono::steady_clock::time_point when;
  bool recorded = false;
};

namespace tda::emu::detail {

inline const char* copy_kind_name(cudaMemcpyKind kind) {
  switch (kind) {
    case cudaMemcpyHostToHost:
      return "HostToHost";
    case cudaMemcpyHostToDevice:
      return "HostToDevice";
    case cudaMemcpyDeviceToHost:
      return "DeviceToHost";
    case cudaMemcpyDeviceToDevice:
      return "DeviceToDevice";
    default:
      return "Default";
  }
}

// Strict mode: each side of a copy where its kind says it lives, device sides wholly inside one
// live allocation. Empty when the copy is fine, else the message.
inline std::string check_copy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  std::lock_guard<std::mutex> lock(runtime().mu);
  auto on_device = [](const void* p) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    return find_in(runtime().live, a) || find_in(runtime().freed, a);
  };
  const std::string call = std::string("cudaMemcpy(") + copy_kind_name(kind) + ", " +
                           std::to_string(count) + " bytes): ";
  const bool dst_dev = kind == cudaMemcpyDefault
                           ? on_device(dst)
                           : kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_dev = kind == cudaMemcpyDefault
                           ? on_device(src)
                           : kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  const struct {
    const char* name;
    const void* p;
    bool device;
  } sides[] = {{"dst", dst, dst_dev}, {"src", src, src_dev}};
  for (const auto& side : sides) {
    if (side.device) {
      const std::string why = describe_range_locked(side.p, count);
      if (!why.empty()) return call + side.name + " " + why;
    } else if (on_device(side.p)) {
      return call + side.name + " " + hex(reinterpret_cast<uintptr_t>(side.p)) +
             " is device memory, but the kind says host";
    }
  }
  return {};
}

}  // namespace tda::emu::detail

extern "C" {

inline cudaError_t cudaGetLastError(void) {
  using namespace tda::emu::detail;
  if (cudaError_t e = fail_if_sticky(); e != cudaSuccess) return e;  // sticky: not cleared
  const cudaError_t e = tl_last_error;
  tl_last_error = cudaSuccess;
  return e;
}
inline cudaError_t cudaPeekAtLastError(void) {
  using namespace tda::emu::detail;
  if (cudaError_t e = fail_if_sticky(); e != cudaSuccess) return e;
  return tl_last_error;
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
    case cudaErrorInvalidDeviceFunction:
      return "cudaErrorInvalidDeviceFunction";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorLaunchOutOfResources:
      return "cudaErrorLaunchOutOfResources";
    case cudaErrorIllegalAddress:
      return "cudaErrorIllegalAddress";
    case cudaErrorNotSupported:
      return "cudaErrorNotSupported";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorInsufficientDriver:
      return "cudaErrorInsufficientDriver";
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
    case cudaErrorInvalidDeviceFunction:
      return "invalid device function";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
    case cudaErrorLaunchOutOfResources:
      return "too many resources requested for launch";
    case cudaErrorIllegalAddress:
      return "an illegal memory access was encountered";
    case cudaErrorNotSupported:
      return "operation not supported";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorInsufficientDriver:
      return "CUDA driver version is insufficient for CUDA runtime version";
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
  return tda::emu::detail::fail_if_sticky();
}
// Ends the context: frees every allocation, forgets function attributes, clears the sticky error.
inline cudaError_t cudaDeviceReset(void) {
  using namespace tda::emu::detail;
  std::lock_guard<std::mutex> lock(runtime().mu);
  release_all();
  runtime().max_dynamic_smem.clear();
  runtime().sticky.store(0, std::memory_order_release);
  runtime().sticky_message.clear();
  tl_last_error = cudaSuccess;
  return cudaSuccess;
}

inline cudaError_t cudaMalloc(void** ptr, size_t size) {
  using namespace tda::emu::detail;
  if (!ptr) return record(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (cudaError_t e = fail_if_sticky(); e != cudaSuccess) return e;
  if (size == 0) return cudaSuccess;
  // A dry run allocates address space only; both count against the device's capacity
  // (memory.h, budget.h, dry_run.h).
  const bool dry = tda::emu::dry_run();
  std::string why;
  std::lock_guard<std::mutex> lock(runtime().mu);
  *ptr = allocate(size, dry, &why);
  return *ptr ? cudaSuccess : record(cudaErrorMemoryAllocation, why);
}

inline cudaError_t cudaFree(void* ptr) {
  using namespace tda::emu::detail;
  if (cudaError_t e = fail_if_sticky(); e != cudaSuccess) return e;
  if (!ptr) return cudaSuccess;
  std::string why;
  std::lock_guard<std::mutex> lock(runtime().mu);
  return release(ptr, &why) ? cudaSuccess : record(cudaErrorInvalidValue, why);
}

inline cudaError_t cudaMallocHost(void** ptr, size_t size) {
  using namespace tda::emu::detail;
  if (!ptr) return record(cudaErrorInvalidValue);
  if (cudaError_t e = fail_if_sticky(); e != cudaSuccess) return e;
  *ptr = std::malloc(size ? size : 1);
  return *ptr ? cudaSuccess : record(cudaErrorMemoryAllocation);
}
inline cudaError_t cudaFreeHost(void* ptr) {
  if (cudaError_t e = tda::emu::detail::fail_if_sticky(); e != cudaSuccess) return e;
  std::free(ptr);
  return cudaSuccess;
}

inline cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (cudaError_t e = tda::emu::detail::fail_if_sticky(); e != cudaSuccess) return e;
  const tda::emu::MemoryStats m = tda::emu::memory_stats();  // budget.h: the capped device
  if (total_bytes) *total_bytes = m.cap;
  if (free_bytes) *free_bytes = m.live < m.cap ? m.cap - m.live : 0;
  return cudaSuccess;
}

inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
  using namespace tda::emu::detail;
  if (cudaError_t e = fail_if_sticky(); e != cudaSuccess) return e;
  if (count == 0) return cudaSuccess;
  if (!dst || !src || static_cast<int>(kind) < 0 || static_cast<int>(kind) > 4)
    return record(cudaErrorInvalidValue);
  if (tda::emu::strict())
    if (std::string why = check_copy(dst, src, count, kind); !why.empty())
      return record(cudaErrorInvalidValue, why);
  if (memcpy_hook(dst, src, count, kind)) return cudaSuccess;  // dry_run.h: counted, dry skipped
  tda::emu::DeviceAccess access;
  std::memmove(dst, src, count);
  return tda::emu::check_tails(std::string("cudaMemcpy(") + copy_kind_name(kind) + ")");
}
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count,
                                   enum cudaMemcpyKind kind, cudaStream_t /*stream*/) {
  return cudaMemcpy(dst, src, count, kind);
}
inline cudaError_t cudaMemset(void* ptr, int value, size_t count) {
  using namespace tda::emu::detail;
  if (cudaError_t e = fail_if_sticky(); e != cudaSuccess) return e;
  if (count == 0) return cudaSuccess;
  if (!ptr) return record(cudaErrorInvalidValue);
  if (tda::emu::strict())
    if (std::string why = tda::emu::describe_range(ptr, count); !why.empty())
      return record(cudaErrorInvalidValue,
                    "cudaMemset(" + std::to_string(count) + " bytes): " + why);
  if (memset_hook(ptr)) return cudaSuccess;  // dry_run.h: counted, dry memory skipped
  tda::emu::DeviceAccess access;
  std::memset(ptr, value, count);
  return tda::emu::check_tails("cudaMemset");
}
inline cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t /*stream*/) {
  return cudaMemset(ptr, value, count);
}

inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  if (!stream) return tda::emu::detail::record(cudaErrorInvalidValue);
  if (cudaError_t e = tda::emu::detail::fail_if_sticky(); e != cudaSuccess) return e;
  *stream = new CUstream_st{flags};
  return cudaSuccess;
}
inline cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, 0);
}
inline cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream) return tda::emu::detail::record(cudaErrorInvalidResourceHandle);
  delete stream;  // the handle goes even when the context is lost
  return tda::emu::detail::fail_if_sticky();
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t /*stream*/) {
  tda::emu::detail::note_sync();
  return tda::emu::detail::fail_if_sticky();
}
inline cudaError_t cudaStreamWaitEvent(cudaStream_t /*stream*/, cudaEvent_t event,
                                       unsigned int /*flags*/) {
  if (cudaError_t e = tda::emu::detail::fail_if_sticky(); e != cudaSuccess) return e;
  return event ? cudaSuccess : tda::emu::detail::record(cudaErrorInvalidResourceHandle);
}

inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int /*flags*/) {
  if (!event) return tda::emu::detail::record(cudaErrorInvalidValue);
  if (cudaError_t e = tda::emu::detail::fail_if_sticky(); e != cudaSuccess) return e;
  *event = new CUevent_st{};
  return cudaSuccess;
}
inline cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, 0);
}
inline cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event) return tda::emu::detail::record(cudaErrorInvalidResourceHandle);
  delete event;
  return tda::emu::detail::fail_if_sticky();
}
inline cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t /*stream*/) {
  if (cudaError_t e = tda::emu::detail::fail_if_sticky(); e != cudaSuccess) return e;
  if (!event) return tda::emu::detail::record(cudaErrorInvalidResourceHandle);
  event->when = std::chrono::steady_clock::now();
  event->recorded = true;
  return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (cudaError_t e = tda::emu::detail::fail_if_sticky(); e != cudaSuccess) return e;
  if (!event) return tda::emu::detail::record(cudaErrorInvalidResourceHandle);
  tda::emu::detail::note_sync();
  return cudaSuccess;
}
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (cudaError_t e = tda::emu::detail::fail_if_sticky(); e != cudaSuccess) return e;
  if (!ms) return tda::emu::detail::record(cudaErrorInvalidValue);
  if (!start || !end || !start->recorded || !end->recorded)
    return tda::emu::detail::record(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return cudaSuccess;
}

inline cudaError_t cudaFuncSetAttribute(const void* func, enum cudaFuncAttribute attr, int value) {
  using namespace tda::emu::detail;
  if (cudaError_t e = fail_if_sticky(); e != cudaSuccess) return e;
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
