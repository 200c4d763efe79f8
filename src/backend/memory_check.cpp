#include "backend/memory_check.h"

#include "backend/device.h"
#include "core/bytes.h"
#include "core/error.h"
#include "core/host_memory.h"

namespace tda {

namespace {

// size_text() past the GiB range of a typo (--max-context 100000000000) stays readable, and
// the exact count is there for a script.
std::string bytes_text(size_t b) {
  return size_text(b) + " (" + std::to_string(b) + " bytes)";
}

}  // namespace

void require_memory(Ops& ops, const MemoryNeed& need, const std::string& what) {
  Device& dev = ops.device();
  const bool emulated = dev.emulator() != nullptr;
  size_t host = need.host;
  if (ops.host_memory() || emulated) host += need.backend;
  if (!ops.host_memory()) {
    const size_t free_dev = dev.memory_free();
    TDA_CHECK(need.backend <= free_dev, what + " needs " + bytes_text(need.backend) + " of " +
                                            dev.name() + " memory; " + size_text(free_dev) +
                                            " free");
  }
  if (host == 0) return;
  const HostMemory hm = available_host_memory();
  TDA_CHECK(host <= hm.bytes, what + " needs " + bytes_text(host) + " of host memory; " +
                                  size_text(hm.bytes) + " available (" + hm.bound + ")");
}

}  // namespace tda
