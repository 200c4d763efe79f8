// The emulated device's counters, memory and dry-run switch (emu/dry_run.h, emu/budget.h) as
// backend/device.h's EmulatedDevice, for code that does not include CUDA headers: the dry-run
// bench reaches it as ops.device().emulator(), the tests as emulated_device(). In a GPU build
// (nvcc) there is no emulator: null.
#pragma once
#include "backend/device.h"

namespace tda::cuda {

EmulatedDevice* emulated_device();

}  // namespace tda::cuda
