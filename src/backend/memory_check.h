// Memory refused before it is taken: a command that sizes buffers from what a user typed (a
// context length, a batch, a checkpoint's config) states what it is about to allocate and gets
// one line naming the option and both sizes when that cannot fit, instead of an allocation that
// the OOM killer ends (rc 137, no message, a shared node under memory pressure) or a
// std::bad_alloc naming nothing.
#pragma once
#include <cstddef>
#include <string>

#include "backend/ops.h"

namespace tda {

// Bytes a command will allocate: in the backend's memory (its buffers, DeviceArray) and in
// plain host memory (std::vector and friends, on every backend).
struct MemoryNeed {
  size_t backend = 0;
  size_t host = 0;
  MemoryNeed& operator+=(const MemoryNeed& o) {
    backend += o.backend;
    host += o.host;
    return *this;
  }
};

// Throws "<what> needs 12.80 GiB of host memory; 3.41 GiB available (MemAvailable)" (or of the
// device's memory, naming the device) when `need` does not fit what is free now. On a backend
// in host memory (the CPU) both parts count against the host; the emulated GPU's memory is host
// memory too, so there the backend part counts against both.
void require_memory(Ops& ops, const MemoryNeed& need, const std::string& what);

}  // namespace tda
