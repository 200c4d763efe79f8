// Kernel launch under the emulator: validates the configuration like the driver does (and, in
// strict mode, against the nvcc build's resources and the live allocations: emu/strict.h),
// counts it (emu/dry_run.h), then runs the blocks of the grid one after another on the calling OS
// thread, in x-fastest order or, with a schedule seed, in a seeded random order; in a dry run no
// block runs.
#pragma once

#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "backend/cuda/emu/runtime.h"
#include "backend/cuda/emu/scheduler.h"
#include "backend/cuda/emu/strict.h"

namespace tda::emu {

namespace detail {

constexpr uintptr_t kSmemAlignment = 128;
constexpr size_t kSmemTailBytes = 256;  // poisoned bytes after a block's dynamic shared memory

inline std::string dims(dim3 d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

inline cudaError_t check_config(const std::string& name, dim3 grid, dim3 block, size_t shmem,
                                const void* kernel, std::string* why) {
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0 || threads > 1024 || block.z > 64 ||
      grid.y > 65535 || grid.z > 65535 || grid.x > 2147483647u) {
    *why = "kernel " + name + ": grid " + dims(grid) + " of blocks " + dims(block) +
           " is not a valid launch configuration";
    return cudaErrorInvalidConfiguration;
  }
  size_t limit = kDefaultDynamicSmem;
  {
    std::lock_guard<std::mutex> lock(runtime().mu);
    auto it = runtime().max_dynamic_smem.find(kernel);
    if (it != runtime().max_dynamic_smem.end()) limit = static_cast<size_t>(it->second);
  }
  if (shmem > limit) {
    *why = "kernel " + name + ": " + std::to_string(shmem) +
           " bytes of dynamic shared memory exceed the kernel's limit of " + std::to_string(limit) +
           " (raise it with cudaFuncSetAttribute)";
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

// The order blocks run in: x-fastest, or with a schedule seed the seeded permutation
// i -> (a i + c) mod n (a coprime to n), which needs no table for grids of any size.
struct BlockOrder {
  unsigned long long n = 1, a = 1, c = 0;
  BlockOrder(dim3 grid, bool shuffle) : n(1ull * grid.x * grid.y * grid.z) {
    if (!shuffle || n < 2) return;
    auto gcd = [](unsigned long long x, unsigned long long y) {
      while (y) x %= y, std::swap(x, y);
      return x;
    };
    do a = 1 + next_random() % (n - 1);
    while (gcd(a, n) != 1);
    c = next_random() % n;
  }
  unsigned long long operator[](unsigned long long i) const {
    return static_cast<unsigned long long>((static_cast<unsigned __int128>(a) * i + c) % n);
  }
};

// Strict mode: the first byte of the dynamic shared memory's tail a block changed, or -1.
inline long smem_tail_damage(const unsigned char* tail) {
  for (size_t i = 0; i < kSmemTailBytes; ++i)
    if (tail[i] != kTailPoison[i & 1]) return long(i);
  return -1;
}

inline cudaError_t run_grid(const std::string& name, dim3 grid, dim3 block, size_t shmem,
                            void (*body)(const void*), const void* arg) {
  Exec& e = exec();
  if (tl_exec)
    return record(cudaErrorNotSupported,
                  "kernel " + name + " launched from inside a kernel (not emulated)");
  if (shmem + kSmemTailBytes > e.smem_capacity) {
    e.smem.reset(new unsigned char[shmem + kSmemTailBytes + kSmemAlignment]);
    e.smem_capacity = shmem + kSmemTailBytes;
  }
  auto raw = reinterpret_cast<uintptr_t>(e.smem.get());
  auto* smem = reinterpret_cast<unsigned char*>((raw + kSmemAlignment - 1) & ~(kSmemAlignment - 1));
  const bool strict_mode = strict();
  for (size_t i = 0; i < kSmemTailBytes; ++i) smem[shmem + i] = kTailPoison[i & 1];
  const BlockOrder order(grid, schedule_seed() != 0);
  DeviceAccess access;  // the host-access guard lets kernels (only) touch device memory
  for (unsigned long long i = 0; i < order.n; ++i) {
    const unsigned long long linear = order[i];
    Block b;
    b.idx = uint3{unsigned(linear % grid.x), unsigned(linear / grid.x % grid.y),
                  unsigned(linear / grid.x / grid.y)};
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
    if (!run_block(e, b, &error))
      return fault(cudaErrorLaunchFailure, "kernel " + name + ": " + error);
    if (strict_mode) {
      const long at = smem_tail_damage(smem + shmem);
      if (at >= 0)
        return fault(cudaErrorIllegalAddress, "kernel " + name + ": block " +
                                                  dims(dim3(b.idx.x, b.idx.y, b.idx.z)) +
                                                  " wrote past its " + std::to_string(shmem) +
                                                  " bytes of dynamic shared memory (byte " +
                                                  std::to_string(at) + " after the end)");
    }
  }
  return check_tails("kernel " + name);  // inside `access`: no second unprotect of every page
}

template <auto Kernel, class Params>
struct Invocation {
  Params* params;
  static void run(const void* self) {
    auto* inv = static_cast<const Invocation*>(self);
    // Each thread gets its own copy of the parameters, as each reads them from constant memory.
    Params copy = *inv->params;
    std::apply(Kernel, copy);
  }
};

template <class F>
struct KernelSignature;
template <class... P>
struct KernelSignature<void (*)(P...)> {
  using Params = std::tuple<std::decay_t<P>...>;
  static constexpr size_t arity = sizeof...(P);
};

}  // namespace detail

// Runs Kernel<<<grid, block, shmem, stream>>>(args...) on the CPU. Arguments are converted to
// the kernel's parameter types first, as the real launch does. Returns the launch's error, which
// is also what cudaGetLastError reports afterwards; a fault in the kernel is sticky (every later
// call fails with it until cudaDeviceReset).
template <auto Kernel, class... A>
cudaError_t launch(dim3 grid, dim3 block, size_t shmem, cudaStream_t /*stream*/, A&&... args) {
  using Sig = detail::KernelSignature<decltype(Kernel)>;
  static_assert(Sig::arity == sizeof...(A), "kernel launched with the wrong number of arguments");
  if (cudaError_t e = detail::fail_if_sticky(); e != cudaSuccess) return e;
  const std::string& name = kernel_name<Kernel>();
  const void* id = reinterpret_cast<const void*>(Kernel);
  std::string why;
  cudaError_t err = detail::check_config(name, grid, block, shmem, id, &why);
  if (err == cudaSuccess && strict()) err = detail::check_resources(name, id, block, shmem, &why);
  detail::note_launch(&name, grid, block, shmem, err == cudaSuccess);  // dry_run.h: counters
  if (err != cudaSuccess) return detail::record(err, why);
  typename Sig::Params params(std::forward<A>(args)...);
  if (strict()) {
    why = detail::check_pointer_args(name, params);
    if (!why.empty()) return detail::fault(cudaErrorIllegalAddress, why);
  }
  if (dry_run()) return cudaSuccess;  // validated and counted; no block runs
  if (detail::injected_fault(name))
    return detail::fault(cudaErrorLaunchFailure,
                         "kernel " + name + ": __trap() (fault injected by TDA_EMU_FAULT)");
  detail::Invocation<Kernel, typename Sig::Params> inv{&params};
  return detail::run_grid(name, grid, block, shmem, &decltype(inv)::run, &inv);
}

}  // namespace tda::emu
