// Kernel launch under the emulator: validates the configuration like the driver does, then runs
// the blocks of the grid one after another on the calling OS thread.
#pragma once

#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "backend/cuda/emu/runtime.h"
#include "backend/cuda/emu/scheduler.h"

namespace tda::emu {

namespace detail {

constexpr uintptr_t kSmemAlignment = 128;

inline cudaError_t check_config(dim3 grid, dim3 block, size_t shmem, const void* kernel,
                                std::string* why) {
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0 || threads > 1024 || block.z > 64 ||
      grid.y > 65535 || grid.z > 65535 || grid.x > 2147483647u) {
    *why = "invalid launch configuration";
    return cudaErrorInvalidConfiguration;
  }
  size_t limit = kDefaultDynamicSmem;
  {
    std::lock_guard<std::mutex> lock(runtime().mu);
    auto it = runtime().max_dynamic_smem.find(kernel);
    if (it != runtime().max_dynamic_smem.end()) limit = static_cast<size_t>(it->second);
  }
  if (shmem > limit) {
    *why = "dynamic shared memory of " + std::to_string(shmem) +
           " bytes exceeds the kernel's limit of " + std::to_string(limit) +
           " (raise it with cudaFuncSetAttribute)";
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

inline cudaError_t run_grid(dim3 grid, dim3 block, size_t shmem, void (*body)(const void*),
                            const void* arg) {
  Exec& e = exec();
  if (tl_exec) {
    record(cudaErrorNotSupported, "kernel launched from inside a kernel (not emulated)");
    return cudaErrorNotSupported;
  }
  if (shmem > e.smem_capacity) {
    e.smem.reset(new unsigned char[shmem + kSmemAlignment]);
    e.smem_capacity = shmem;
  }
  auto raw = reinterpret_cast<uintptr_t>(e.smem.get());
  auto* smem = reinterpret_cast<unsigned char*>((raw + kSmemAlignment - 1) & ~(kSmemAlignment - 1));
  DeviceAccess access;  // the host-access guard lets kernels (only) touch device memory
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        Block b;
        b.idx = uint3{x, y, z};
        b.dim = block;
        b.grid = grid;
        b.n = block.x * block.y * block.z;
        b.dynamic_smem = smem;
        b.dynamic_bytes = shmem;
        // Shared memory is not zeroed on the GPU either; NaN bytes expose reads before writes.
        if (shmem) std::memset(b.dynamic_smem, kUninitialisedByte, shmem);
        b.body = body;
        b.body_arg = arg;
        std::string error;
        if (!run_block(e, b, &error)) {
          std::fprintf(stderr, "tda emu: kernel failed: %s\n", error.c_str());
          record(cudaErrorLaunchFailure, error);
          tl_kernel_error = cudaErrorLaunchFailure;
          return cudaErrorLaunchFailure;
        }
      }
  return cudaSuccess;
}

template <class Kernel, class Params>
struct Invocation {
  Kernel kernel;
  Params* params;
  static void run(const void* self) {
    auto* inv = static_cast<const Invocation*>(self);
    // Each thread gets its own copy of the parameters, as each reads them from constant memory.
    Params copy = *inv->params;
    std::apply(inv->kernel, copy);
  }
};

}  // namespace detail

// Runs kernel<<<grid, block, shmem, stream>>>(args...) on the CPU. Arguments are converted to the
// kernel's parameter types first, as the real launch does. Returns the launch's error, which is
// also what cudaGetLastError/cudaDeviceSynchronize report afterwards.
template <class... P, class... A>
cudaError_t launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t shmem,
                   cudaStream_t /*stream*/, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "kernel launched with the wrong number of arguments");
  std::string why;
  const void* entry = reinterpret_cast<const void*>(kernel);
  cudaError_t err = detail::check_config(grid, block, shmem, entry, &why);
  detail::note_launch(entry, grid, block, shmem, err == cudaSuccess);  // dry_run.h: counters
  if (err != cudaSuccess) return detail::record(err, why);
  if (dry_run()) return cudaSuccess;  // validated and counted; no block runs
  using Params = std::tuple<std::decay_t<P>...>;
  Params params(std::forward<A>(args)...);
  detail::Invocation<void (*)(P...), Params> inv{kernel, &params};
  return detail::run_grid(grid, block, shmem, &decltype(inv)::run, &inv);
}

}  // namespace tda::emu
