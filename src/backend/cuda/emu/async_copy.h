// cp.async (sm_80+): asynchronous 16-byte copies from global to shared memory. A copy may land
// at any moment between its issue and the cp.async.wait_group that covers it; the emulator picks
// the two extremes, so that a kernel missing a wait or a barrier reads the wrong bytes here as it
// may on a GPU. A copy takes its source bytes when issued, and its destination is written:
//   - in-order schedule (seed 0): at the latest point, when the same thread's wait_group covers
//     its group. A missing wait_group: the copy never lands (pending copies are dropped at
//     thread exit). A missing __syncthreads after the wait: another thread's part of the tile
//     lands only when that thread reaches its own wait, after this thread read it.
//   - shuffled schedule (set_schedule_seed): at issue or at that wait, a seeded coin flip per
//     copy. Landing at issue exposes a buffer refilled before every thread finished reading it
//     (a missing __syncthreads before the refill).
// __syncthreads does not complete copies, as on the GPU. Strict mode checks the source range.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "backend/cuda/emu/memory.h"
#include "backend/cuda/emu/scheduler.h"
#include "backend/cuda/emu/state.h"

namespace tda::emu {

// cp.async.cg.shared.global [dst], [src], 16, src_bytes: the first src_bytes (0..16) of the 16
// come from src, the rest are zero-filled. Both addresses 16-byte aligned; dst in shared memory.
inline void cp_async_16(void* dst, const void* src, int src_bytes) {
  detail::Thread& t = detail::cur_thread();
  const detail::Block& b = detail::cur_block();
  if (src_bytes < 0 || src_bytes > 16)
    detail::fail("cp.async source size %d is outside [0, 16]", src_bytes);
  if (reinterpret_cast<uintptr_t>(dst) % 16 != 0 || reinterpret_cast<uintptr_t>(src) % 16 != 0)
    detail::fail("cp.async of 16 bytes needs 16-byte aligned addresses (dst %p, src %p)", dst, src);
  auto* d = static_cast<unsigned char*>(dst);
  const bool in_dynamic = d >= b.dynamic_smem && d + 16 <= b.dynamic_smem + b.dynamic_bytes;
  if (!in_dynamic && device_address(dst))
    detail::fail("cp.async destination %p is global memory, not shared", dst);
  // A zero-filled copy (src_bytes 0) reads nothing, but the PTX ISA does not say that any address
  // is then accepted: its 16 bytes must lie in an allocation too, as the kernels keep them
  // (load_tile_async's padded operand buffer).
  if (strict()) {
    // fail() leaves this fiber for good, so nothing with a destructor may be alive when it is
    // called (LeakSanitizer would report the string's buffer).
    char why[384] = "";
    {
      const std::string w = describe_range(src, src_bytes > 0 ? size_t(src_bytes) : 16);
      std::snprintf(why, sizeof why, "%s", w.c_str());
    }
    if (why[0]) detail::fail("cp.async source: %s", why);
  }
  detail::AsyncCopy c;
  c.dst = d;
  std::memcpy(c.data, src, size_t(src_bytes));
  if (schedule_seed() != 0 && (detail::next_random() & 1)) {
    std::memcpy(d, c.data, 16);  // the earliest completion
    return;
  }
  c.group = detail::kUncommitted;
  t.async_copies.push_back(c);
}

// cp.async.commit_group: the copies issued since the last commit become one group (possibly
// empty).
inline void cp_async_commit() {
  detail::Thread& t = detail::cur_thread();
  const unsigned g = ++t.async_groups;
  for (auto& c : t.async_copies)
    if (c.group == detail::kUncommitted) c.group = g;
}

// cp.async.wait_group n: returns once at most the newest n committed groups of this thread are
// still pending; the older ones land now. Uncommitted copies are not waited for.
inline void cp_async_wait(int n) {
  detail::Thread& t = detail::cur_thread();
  const unsigned last = t.async_groups > unsigned(n) ? t.async_groups - unsigned(n) : 0;
  size_t kept = 0;
  for (auto& c : t.async_copies) {
    if (c.group != detail::kUncommitted && c.group <= last)
      std::memcpy(c.dst, c.data, 16);
    else
      t.async_copies[kept++] = c;
  }
  t.async_copies.resize(kept);
}

}  // namespace tda::emu
