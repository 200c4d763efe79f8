// The Ops memory defaults: plain host memory, so the CPU backend's buffers are ordinary
// arrays (no copies beyond what the caller asks for).
#include "backend/ops.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <string>

#include "core/error.h"

namespace tda {

void* Ops::alloc_bytes(size_t bytes) {
  constexpr size_t kAlign = 64;  // a cache line; AVX-512 loads never straddle two
  const size_t rounded = (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded);
  TDA_CHECK(p, std::string(name()) + ": out of host memory allocating " + std::to_string(bytes) +
                   " bytes");
  return p;
}

void Ops::free_bytes(void* p) { std::free(p); }

void Ops::upload(void* dst, const void* host_src, size_t bytes) {
  if (bytes) std::memcpy(dst, host_src, bytes);
}
void Ops::download(void* host_dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(host_dst, src, bytes);
}
void Ops::copy(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memmove(dst, src, bytes);
}

}  // namespace tda
