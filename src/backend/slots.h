// Slot tables: the buffers carved from one allocation, listed once. A table names each buffer
// (a member of a struct of float pointers) and its size; the same table gives the allocation's
// size (slot_floats) and the pointers (carve), so the two cannot disagree. Every slot starts on a
// 64-float (256-byte) boundary, the alignment cudaMalloc gives, so vectorised kernels see the
// same alignment as separate allocations. The model's activation arena (model/gpt2.cpp) and each
// attention kind's saved activations and backward scratch (src/attention) are carved this way.
#pragma once
#include <cstddef>
#include <vector>

namespace tda {

template <class S>
struct Slot {
  float* S::*member;
  size_t n;  // floats
};
template <class S>
using SlotTable = std::vector<Slot<S>>;

constexpr size_t kSlotAlignFloats = 64;
inline size_t slot_padded(size_t n) {
  return (n + kSlotAlignFloats - 1) / kSlotAlignFloats * kSlotAlignFloats;
}

// Floats the table takes (each slot padded to the alignment).
template <class S>
size_t slot_floats(const SlotTable<S>& table) {
  size_t total = 0;
  for (const Slot<S>& s : table) total += slot_padded(s.n);
  return total;
}

// Points each slot's member of `into` at its place in base[0, slot_floats(table)).
template <class S>
void carve_into(S& into, const SlotTable<S>& table, float* base) {
  size_t at = 0;
  for (const Slot<S>& s : table) {
    into.*s.member = base + at;
    at += slot_padded(s.n);
  }
}
template <class S>
S carve(const SlotTable<S>& table, float* base) {
  S s{};
  carve_into(s, table, base);
  return s;
}

}  // namespace tda
