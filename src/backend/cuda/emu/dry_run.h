// Launch and transfer counters of the emulated runtime, and its dry-run mode.
//
// Counters (always on): kernel launches (with the largest grids seen), emulated GEMM calls,
// memcpys by direction, memsets and synchronising calls. They are process-wide and only grow;
// take a counters() snapshot before and after the work to measure.
//
// Dry run (set_dry_run(true) or TDA_EMU_DRY_RUN=1): the host code runs as usual and every
// launch is validated exactly as it is for a real run (launch.h: grid and block limits, dynamic
// shared memory and its opt-in, and in strict mode the launch-resource table and the pointer
// arguments), but no block executes; the emulated GEMM checks its operands and skips the product
// (gemm.cu). cudaMalloc reserves address space only (PROT_NONE, MAP_NORESERVE: nothing is
// committed, so a 160 GB model "allocates" on a laptop) in the runtime's one table of
// allocations (memory.h), counted against the device memory cap (budget.h). Copies and memsets
// touching that memory are checked as in a real run, counted and skipped; a download from it
// fills the host buffer with zeros, so a loss reads 0, a grad norm 0 and a small parameter
// (TDA's lambda) 0: finite values that keep the host on its normal path. Any host dereference of
// dry-run memory faults (SIGSEGV), as on a GPU.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

#include "backend/cuda/emu/memory.h"

namespace tda::emu {

struct LaunchShape {
  const std::string* kernel = nullptr;  // kernel_name<Kernel>() (emu/strict.h)
  dim3 grid{0, 0, 0}, block{0, 0, 0};
  size_t shmem = 0;
  unsigned long long blocks() const { return 1ull * grid.x * grid.y * grid.z; }
};

struct Counters {
  uint64_t launches = 0;          // kernel launches (valid or not)
  uint64_t invalid_launches = 0;  // refused by the launch checks
  uint64_t gemms = 0;             // tda::cuda::gemm calls (one cublasLtMatmul each on a GPU)
  uint64_t gemm_epilogues = 0;    // of which with an epilogue kernel (a GPU's cuBLASLt fuses it)
  uint64_t uploads = 0, downloads = 0, device_copies = 0, memsets = 0;
  uint64_t upload_bytes = 0, download_bytes = 0;
  uint64_t synchronize_calls = 0;        // cudaDeviceSynchronize / cudaStreamSynchronize / ...
  LaunchShape largest;                   // most blocks
  LaunchShape max_y, max_z;              // largest grid.y, grid.z
  LaunchShape last;                      // the latest launch (what failed, when one fails)
  std::set<const std::string*> kernels;  // every kernel launched validly (names from launch.h)
  // Points where the host waits for the device: synchronising calls, downloads, and uploads
  // (cudaMemcpy from pageable host memory synchronises the stream before it copies).
  uint64_t host_syncs() const { return synchronize_calls + downloads + uploads; }
};

namespace detail {

struct DryRun {
  std::mutex mu;
  Counters counters;
  std::atomic<bool> on{[] {
    const char* e = std::getenv("TDA_EMU_DRY_RUN");
    return e && *e && std::strcmp(e, "0") != 0;
  }()};
};
inline DryRun& dry() {
  static DryRun d;
  return d;
}

// Every launch, after its checks (launch.h); the largest grids are those of valid launches.
inline void note_launch(const std::string* kernel, dim3 grid, dim3 block, size_t shmem,
                        bool valid) {
  DryRun& d = dry();
  std::lock_guard<std::mutex> lock(d.mu);
  Counters& c = d.counters;
  const LaunchShape s{kernel, grid, block, shmem};
  ++c.launches;
  c.last = s;
  if (!valid) {
    ++c.invalid_launches;
    return;
  }
  c.kernels.insert(kernel);
  if (s.blocks() > c.largest.blocks()) c.largest = s;
  if (grid.y > c.max_y.grid.y) c.max_y = s;
  if (grid.z > c.max_z.grid.z) c.max_z = s;
}
inline void note_sync() {
  std::lock_guard<std::mutex> lock(dry().mu);
  ++dry().counters.synchronize_calls;
}

// What p is: not device memory, device memory, or dry-run memory.
enum class Memory { kHost, kDevice, kDry };
inline Memory memory_kind(const void* p) {
  std::lock_guard<std::mutex> lock(runtime().mu);
  const auto* a = find_in(runtime().live, reinterpret_cast<uintptr_t>(p));
  return !a ? Memory::kHost : a->second.dry ? Memory::kDry : Memory::kDevice;
}

// cudaMemcpy, before it copies: counts the copy; true when it touches dry-run memory, which
// holds nothing: then nothing is copied and a host destination gets zeros.
inline bool memcpy_hook(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  const Memory dst_kind = memory_kind(dst), src_kind = memory_kind(src);
  if (kind == cudaMemcpyDefault || kind == cudaMemcpyHostToHost) {
    const bool d = dst_kind != Memory::kHost, s = src_kind != Memory::kHost;
    kind = d && s ? cudaMemcpyDeviceToDevice
           : d    ? cudaMemcpyHostToDevice
           : s    ? cudaMemcpyDeviceToHost
                  : cudaMemcpyHostToHost;
  }
  {
    std::lock_guard<std::mutex> lock(dry().mu);
    Counters& c = dry().counters;
    if (kind == cudaMemcpyHostToDevice) ++c.uploads, c.upload_bytes += count;
    if (kind == cudaMemcpyDeviceToHost) ++c.downloads, c.download_bytes += count;
    if (kind == cudaMemcpyDeviceToDevice) ++c.device_copies;
  }
  if (src_kind != Memory::kDry && dst_kind != Memory::kDry) return false;
  if (src_kind == Memory::kDry && dst_kind == Memory::kHost) std::memset(dst, 0, count);
  return true;
}

// cudaMemset, before it writes: counts it; true when the memory is dry-run memory (skip it).
inline bool memset_hook(void* p) {
  {
    std::lock_guard<std::mutex> lock(dry().mu);
    ++dry().counters.memsets;
  }
  return memory_kind(p) == Memory::kDry;
}

}  // namespace detail

inline bool dry_run() {
  return detail::dry().on.load();
}
// Allocations keep the kind they were made with: switch modes only with no device memory of the
// other kind in use (tests do it around a whole model's life).
inline void set_dry_run(bool on) {
  detail::dry().on.store(on);
}
inline Counters counters() {
  std::lock_guard<std::mutex> lock(detail::dry().mu);
  return detail::dry().counters;
}
// Forgets the largest grids seen so far (the counts keep growing).
inline void reset_launch_records() {
  std::lock_guard<std::mutex> lock(detail::dry().mu);
  Counters& c = detail::dry().counters;
  c.largest = c.max_y = c.max_z = LaunchShape{};
}
// Tests: the emulated cuBLASLt refuses the residual epilogue, as a GPU's may, so that gemm.cu
// runs its fallback (the product, then the add_inplace kernel).
inline std::atomic<bool>& lt_refuses_residual() {
  static std::atomic<bool> refuses{false};
  return refuses;
}
// The emulated GEMM (gemm.cu), once per call.
inline void note_gemm(bool epilogue) {
  std::lock_guard<std::mutex> lock(detail::dry().mu);
  ++detail::dry().counters.gemms;
  if (epilogue) ++detail::dry().counters.gemm_epilogues;
}

}  // namespace tda::emu
