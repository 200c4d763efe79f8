// The emulated device's counters, memory and dry-run switch (emu/dry_run.h, emu/budget.h) for
// code that does not include CUDA headers: the dry-run bench (tda bench dryrun) and tests. In a
// GPU build (nvcc) there is no emulator: emulated() is false and the other calls throw.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace tda::cuda {

struct LaunchRecord {
  std::string kernel;  // demangled name without namespaces and parameters ("" if none yet)
  unsigned grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  size_t shmem = 0;
  unsigned long long blocks() const { return 1ull * grid[0] * grid[1] * grid[2]; }
};

struct DeviceStats {
  // Counters since the process started (since(): over an interval).
  uint64_t launches = 0, invalid_launches = 0, gemms = 0, gemm_epilogues = 0;
  uint64_t uploads = 0, downloads = 0, device_copies = 0, memsets = 0, synchronize_calls = 0;
  uint64_t host_syncs = 0;  // synchronising calls + uploads + downloads (emu/dry_run.h)
  uint64_t allocations = 0, frees = 0;
  // Memory now: the cap cudaMalloc fails past, live bytes, the peak since reset_peaks(), and
  // which buffers (by name) made up that peak. Footprints in whole 2 MiB pages (budget.h).
  size_t cap_bytes = 0, live_bytes = 0, peak_bytes = 0;
  std::map<std::string, size_t> at_peak;
  // The launches with the most blocks, the largest grid.y and grid.z since reset_peaks(), and
  // the latest launch (the one that failed, when one did).
  LaunchRecord largest, max_y, max_z, last;

  // The counters accumulated since `before` (memory and launch records as now).
  DeviceStats since(const DeviceStats& before) const;
};

bool emulated();
DeviceStats device_stats();
void set_dry_run(bool on);
bool dry_run();
void set_device_memory_cap(size_t bytes);  // 0: TDA_EMU_DEVICE_GB, or 80 GiB
void reset_peaks();  // the memory peak (to the live bytes) and the largest grids

}  // namespace tda::cuda
