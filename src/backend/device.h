// The machine a backend runs on, as measurements see it (tda bench, the GPU kit): its name, a
// timer on its timeline, the memory in use, a barrier, and on the emulated GPU the emulator's
// counters. Callers get it from their backend (Ops::device()), so nothing above the backends
// includes a concrete one: the host's is here, the GPU's in backend/cuda/timing.cu.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

namespace tda {

// start() and stop() only record (no barrier, so timers can nest without adding gaps to the
// outer one); ms() waits for stop and returns the milliseconds between the two.
class DeviceTimer {
 public:
  virtual ~DeviceTimer() = default;
  virtual void start() = 0;
  virtual void stop() = 0;
  virtual double ms() = 0;
};

// The emulated GPU's counters (emu/dry_run.h, emu/budget.h), since the process started.
struct LaunchRecord {
  std::string kernel;  // demangled name without namespaces and parameters ("" if none yet)
  unsigned grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  size_t shmem = 0;
  unsigned long long blocks() const { return 1ull * grid[0] * grid[1] * grid[2]; }
};

struct DeviceStats {
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
  // Every kernel launched validly since the process started, by its qualified name with template
  // arguments (as ptxas reports it: scripts/check_spills.py).
  std::set<std::string> kernels;

  // The counters accumulated since `before` (memory and launch records as now).
  DeviceStats since(const DeviceStats& before) const;
};

// The emulator's controls: counters, the dry run (kernels validated, not executed) and the
// memory cap (0: TDA_EMU_DEVICE_GB, or 80 GiB). Process-wide, like the emulated device itself.
class EmulatedDevice {
 public:
  virtual ~EmulatedDevice() = default;
  virtual DeviceStats stats() = 0;
  virtual void set_dry_run(bool on) = 0;
  virtual void set_memory_cap(size_t bytes) = 0;
  virtual void reset_peaks() = 0;  // the memory peak (to the live bytes) and the largest grids
};

class Device {
 public:
  virtual ~Device() = default;
  // "NVIDIA H100 80GB HBM3", or the host CPU's model name.
  virtual std::string name() const = 0;
  // The GPU's architecture as nvcc names it ("sm_90"; the emulator's compute capability), "" for
  // the host: the key of a tuning table (backend/attention_tuning.h).
  virtual std::string arch() const { return ""; }
  // What timer() measures: "host clock", "cuda events", or "emulated (host clock)".
  virtual std::string clock() const = 0;
  // True when the timer measures the device itself (not the emulator's host clock): a figure
  // from it means something.
  virtual bool timed() const = 0;
  virtual std::unique_ptr<DeviceTimer> timer() = 0;
  // Bytes in use on the whole device (every process and the context; cudaMemGetInfo), 0 on the
  // host (not measured: host memory is shared with everything else).
  virtual size_t memory_used() const = 0;
  // Bytes a new allocation may still take: free device memory (cudaMemGetInfo; the emulator's
  // cap less its live bytes), or on the host what core/host_memory.h finds.
  virtual size_t memory_free() const = 0;
  virtual void synchronize() = 0;  // waits for all queued work; throws on a kernel error
  virtual EmulatedDevice* emulator() { return nullptr; }
};

// The host: steady_clock timers, nothing queued.
Device& host_device();

}  // namespace tda
