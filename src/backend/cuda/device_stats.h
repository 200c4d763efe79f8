// The emulated device's counters, memory and dry-run switch (emu/dry_run.h, emu/budget.h) for
// code that does not include CUDA headers: tests, and through gpu_device().emulator()
// (timing.h, backend/device.h) the dry-run bench. In a GPU build (nvcc) there is no emulator:
// emulated() is false, emulated_device() null and the other calls throw.
#pragma once
#include <cstddef>

#include "backend/device.h"

namespace tda::cuda {

using ::tda::DeviceStats;
using ::tda::LaunchRecord;

bool emulated();
DeviceStats device_stats();
void set_dry_run(bool on);
bool dry_run();
void set_device_memory_cap(size_t bytes);  // 0: TDA_EMU_DEVICE_GB, or 80 GiB
void reset_peaks();  // the memory peak (to the live bytes) and the largest grids
// The calls above as backend/device.h's interface; null in a GPU build.
EmulatedDevice* emulated_device();

}  // namespace tda::cuda
