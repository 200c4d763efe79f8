// Device-side built-ins under the emulator: thread coordinates, barriers, warp shuffles and
// votes, atomics and the fast-math intrinsics kernels use. Semantics follow the CUDA C++
// Programming Guide and the PTX ISA (shfl.sync's clamp/segment rules in particular).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/cuda/emu/scheduler.h"

// Thread coordinates read the running fiber's state; they are expressions, not variables.
#define threadIdx (::tda::emu::detail::cur_thread().tid)
#define blockIdx (::tda::emu::detail::cur_block().idx)
#define blockDim (::tda::emu::detail::cur_block().dim)
#define gridDim (::tda::emu::detail::cur_block().grid)
inline constexpr int warpSize = 32;

namespace tda::emu::detail {

inline unsigned lane_id() {
  return cur_thread().linear & 31u;
}

// --- warp shuffles -----------------------------------------------------------------------------
enum class ShflMode : int { kIdx, kUp, kDown, kBfly };

struct ShflIn {
  uint64_t value;
  int b;      // source lane or offset
  int width;  // segment width, a power of two <= 32
  ShflMode mode;
};

// Source lane per the PTX shfl.sync pseudocode; the CUDA intrinsics pass c = ((32-width)<<8) | 31
// except __shfl_up_sync, which clamps at the segment's first lane (c = (32-width)<<8).
inline unsigned shfl_source(unsigned lane, const ShflIn& in) {
  const unsigned segmask = static_cast<unsigned>(32 - in.width) & 31u;
  const unsigned cval = in.mode == ShflMode::kUp ? 0u : 31u;
  const int max_lane = static_cast<int>((lane & segmask) | (cval & ~segmask));
  const int min_lane = static_cast<int>(lane & segmask);
  const int b = in.b & 31;
  int j = 0;
  bool ok = false;
  switch (in.mode) {
    case ShflMode::kUp:
      j = static_cast<int>(lane) - b;
      ok = j >= max_lane;
      break;
    case ShflMode::kDown:
      j = static_cast<int>(lane) + b;
      ok = j <= max_lane;
      break;
    case ShflMode::kBfly:
      j = static_cast<int>(lane) ^ b;
      ok = j <= max_lane;
      break;
    case ShflMode::kIdx:
      j = min_lane | (b & static_cast<int>(~segmask & 31u));
      ok = j <= max_lane;
      break;
  }
  return ok ? static_cast<unsigned>(j) : lane;
}

inline void shfl_op(const WarpGroup& g) {
  for (unsigned l = 0; l < 32; ++l) {
    if (!((g.mask >> l) & 1u)) continue;
    const auto& in = *static_cast<const ShflIn*>(g.in[l]);
    unsigned src = shfl_source(l, in);
    // Reading a lane outside the mask is undefined in CUDA; the emulator returns the own value.
    if (!((g.mask >> src) & 1u)) src = l;
    *static_cast<uint64_t*>(g.out[l]) = static_cast<const ShflIn*>(g.in[src])->value;
  }
}

template <class T>
T shfl(unsigned mask, T var, int b, int width, ShflMode mode) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                "shuffles move at most 64 bits of trivially copyable data");
  if (width <= 0 || width > 32 || (width & (width - 1)))
    fail("shuffle width %d is not a power of two in [1, 32]", width);
  ShflIn in{0, b, width, mode};
  std::memcpy(&in.value, &var, sizeof(T));
  uint64_t out = 0;
  warp_collective(&shfl_op, mask, &in, &out);
  T r;
  std::memcpy(static_cast<void*>(&r), &out, sizeof(T));
  return r;
}

// --- votes and reductions ----------------------------------------------------------------------
inline void ballot_op(const WarpGroup& g) {
  unsigned bits = 0;
  for (unsigned l = 0; l < 32; ++l)
    if (((g.mask >> l) & 1u) && *static_cast<const int*>(g.in[l])) bits |= 1u << l;
  for (unsigned l = 0; l < 32; ++l)
    if ((g.mask >> l) & 1u) *static_cast<unsigned*>(g.out[l]) = bits;
}

inline unsigned ballot(unsigned mask, int pred) {
  int in = pred != 0;
  unsigned out = 0;
  warp_collective(&ballot_op, mask, &in, &out);
  return out;
}

inline void nop_op(const WarpGroup&) {}

enum class ReduceKind { kAdd, kMin, kMax, kAnd, kOr, kXor };
template <class T, ReduceKind K>
void reduce_op(const WarpGroup& g) {
  bool first = true;
  T acc{};
  for (unsigned l = 0; l < 32; ++l) {
    if (!((g.mask >> l) & 1u)) continue;
    const T v = *static_cast<const T*>(g.in[l]);
    if (first) {
      acc = v;
      first = false;
      continue;
    }
    switch (K) {
      case ReduceKind::kAdd:
        acc = static_cast<T>(acc + v);
        break;
      case ReduceKind::kMin:
        acc = v < acc ? v : acc;
        break;
      case ReduceKind::kMax:
        acc = v > acc ? v : acc;
        break;
      case ReduceKind::kAnd:
        acc = acc & v;
        break;
      case ReduceKind::kOr:
        acc = acc | v;
        break;
      case ReduceKind::kXor:
        acc = acc ^ v;
        break;
    }
  }
  for (unsigned l = 0; l < 32; ++l)
    if ((g.mask >> l) & 1u) *static_cast<T*>(g.out[l]) = acc;
}

template <class T, ReduceKind K>
T warp_reduce(unsigned mask, T v) {
  T out{};
  warp_collective(&reduce_op<T, K>, mask, &v, &out);
  return out;
}

// --- atomics: real atomics, so blocks may later run on several OS threads ----------------------
template <class T, class F>
T atomic_update(T* address, F f) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomics on 32- or 64-bit words");
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  Bits* p = reinterpret_cast<Bits*>(address);
  Bits old_bits = __atomic_load_n(p, __ATOMIC_RELAXED);
  for (;;) {
    T old_value;
    std::memcpy(&old_value, &old_bits, sizeof(T));
    const T new_value = f(old_value);
    Bits new_bits;
    std::memcpy(&new_bits, &new_value, sizeof(T));
    if (__atomic_compare_exchange_n(p, &old_bits, new_bits, false, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
      return old_value;
  }
}

}  // namespace tda::emu::detail

// --- barriers ----------------------------------------------------------------------------------
inline void __syncthreads() {
  ::tda::emu::detail::block_barrier(1, nullptr);
}
inline int __syncthreads_count(int pred) {
  return ::tda::emu::detail::block_barrier(pred, nullptr);
}
inline int __syncthreads_and(int pred) {
  int total = 0;
  int count = ::tda::emu::detail::block_barrier(pred, &total);
  return count == total;
}
inline int __syncthreads_or(int pred) {
  return ::tda::emu::detail::block_barrier(pred, nullptr) > 0;
}
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::tda::emu::detail::warp_collective(&::tda::emu::detail::nop_op, mask, nullptr, nullptr);
}
inline void __threadfence() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
inline void __threadfence_block() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
[[noreturn]] inline void __trap() {
  ::tda::emu::detail::fail("__trap() called");
}

// --- shuffles and votes ------------------------------------------------------------------------
template <class T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize) {
  return ::tda::emu::detail::shfl(mask, var, src_lane, width, ::tda::emu::detail::ShflMode::kIdx);
}
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  return ::tda::emu::detail::shfl(mask, var, static_cast<int>(delta), width,
                                  ::tda::emu::detail::ShflMode::kUp);
}
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  return ::tda::emu::detail::shfl(mask, var, static_cast<int>(delta), width,
                                  ::tda::emu::detail::ShflMode::kDown);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize) {
  return ::tda::emu::detail::shfl(mask, var, lane_mask, width, ::tda::emu::detail::ShflMode::kBfly);
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
  return ::tda::emu::detail::ballot(mask, pred);
}
inline int __any_sync(unsigned mask, int pred) {
  return ::tda::emu::detail::ballot(mask, pred) != 0;
}
inline int __all_sync(unsigned mask, int pred) {
  return ::tda::emu::detail::ballot(mask, pred) == mask;
}
// Which lanes execute in lockstep is not modelled; every lane of the warp that has not exited
// is reported, which is what converged code observes.
inline unsigned __activemask() {
  using namespace ::tda::emu::detail;
  const Thread& t = cur_thread();
  const unsigned base = t.linear & ~31u;
  unsigned bits = 0;
  for (unsigned l = 0; l < 32 && base + l < cur_block().n; ++l)
    if (tl_exec->threads[base + l].state != State::kDone) bits |= 1u << l;
  return bits;
}
#define TDA_EMU_REDUCE(name, T, kind)                                                             \
  inline T name(unsigned mask, T value) {                                                         \
    return ::tda::emu::detail::warp_reduce<T, ::tda::emu::detail::ReduceKind::kind>(mask, value); \
  }
TDA_EMU_REDUCE(__reduce_add_sync, unsigned, kAdd)
TDA_EMU_REDUCE(__reduce_add_sync, int, kAdd)
TDA_EMU_REDUCE(__reduce_min_sync, unsigned, kMin)
TDA_EMU_REDUCE(__reduce_min_sync, int, kMin)
TDA_EMU_REDUCE(__reduce_max_sync, unsigned, kMax)
TDA_EMU_REDUCE(__reduce_max_sync, int, kMax)
TDA_EMU_REDUCE(__reduce_and_sync, unsigned, kAnd)
TDA_EMU_REDUCE(__reduce_or_sync, unsigned, kOr)
TDA_EMU_REDUCE(__reduce_xor_sync, unsigned, kXor)
#undef TDA_EMU_REDUCE

// --- atomics -----------------------------------------------------------------------------------
#define TDA_EMU_ATOMIC(name, T, expr)                                    \
  inline T name(T* address, T val) {                                     \
    return ::tda::emu::detail::atomic_update(                            \
        address, [val]([[maybe_unused]] T old) -> T { return (expr); }); \
  }
TDA_EMU_ATOMIC(atomicAdd, int,
               static_cast<int>(static_cast<unsigned>(old) + static_cast<unsigned>(val)))
TDA_EMU_ATOMIC(atomicAdd, unsigned, old + val)
TDA_EMU_ATOMIC(atomicAdd, unsigned long long, old + val)
TDA_EMU_ATOMIC(atomicAdd, float, old + val)
TDA_EMU_ATOMIC(atomicAdd, double, old + val)
TDA_EMU_ATOMIC(atomicSub, int,
               static_cast<int>(static_cast<unsigned>(old) - static_cast<unsigned>(val)))
TDA_EMU_ATOMIC(atomicSub, unsigned, old - val)
TDA_EMU_ATOMIC(atomicExch, int, val)
TDA_EMU_ATOMIC(atomicExch, unsigned, val)
TDA_EMU_ATOMIC(atomicExch, unsigned long long, val)
TDA_EMU_ATOMIC(atomicExch, float, val)
TDA_EMU_ATOMIC(atomicMax, int, old > val ? old : val)
TDA_EMU_ATOMIC(atomicMax, unsigned, old > val ? old : val)
TDA_EMU_ATOMIC(atomicMax, long long, old > val ? old : val)
TDA_EMU_ATOMIC(atomicMax, unsigned long long, old > val ? old : val)
TDA_EMU_ATOMIC(atomicMin, int, old < val ? old : val)
TDA_EMU_ATOMIC(atomicMin, unsigned, old < val ? old : val)
TDA_EMU_ATOMIC(atomicMin, long long, old < val ? old : val)
TDA_EMU_ATOMIC(atomicMin, unsigned long long, old < val ? old : val)
TDA_EMU_ATOMIC(atomicAnd, int, old& val)
TDA_EMU_ATOMIC(atomicAnd, unsigned, old& val)
TDA_EMU_ATOMIC(atomicOr, int, old | val)
TDA_EMU_ATOMIC(atomicOr, unsigned, old | val)
TDA_EMU_ATOMIC(atomicXor, int, old ^ val)
TDA_EMU_ATOMIC(atomicXor, unsigned, old ^ val)
#undef TDA_EMU_ATOMIC
inline int atomicCAS(int* address, int compare, int val) {
  __atomic_compare_exchange_n(address, &compare, val, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return compare;
}
inline unsigned atomicCAS(unsigned* address, unsigned compare, unsigned val) {
  __atomic_compare_exchange_n(address, &compare, val, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return compare;
}
inline unsigned long long atomicCAS(unsigned long long* address, unsigned long long compare,
                                    unsigned long long val) {
  __atomic_compare_exchange_n(address, &compare, val, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return compare;
}

// --- math and bit intrinsics -------------------------------------------------------------------
// The fast-math forms are computed at full precision: kernels must not depend on their error.
inline float __expf(float x) {
  return std::exp(x);
}
inline float __exp10f(float x) {
  return std::pow(10.0f, x);
}
inline float __logf(float x) {
  return std::log(x);
}
inline float __log2f(float x) {
  return std::log2(x);
}
inline float __sinf(float x) {
  return std::sin(x);
}
inline float __cosf(float x) {
  return std::cos(x);
}
inline float __tanf(float x) {
  return std::tan(x);
}
inline float __powf(float x, float y) {
  return std::pow(x, y);
}
inline float __fdividef(float x, float y) {
  return x / y;
}
inline float __frcp_rn(float x) {
  return 1.0f / x;
}
inline float __fsqrt_rn(float x) {
  return std::sqrt(x);
}
inline float rsqrtf(float x) {
  return 1.0f / std::sqrt(x);
}
inline double rsqrt(double x) {
  return 1.0 / std::sqrt(x);
}
inline float __saturatef(float x) {
  return std::isnan(x) ? 0.0f : std::fmin(std::fmax(x, 0.0f), 1.0f);
}
inline float __fadd_rn(float a, float b) {
  return a + b;
}
inline float __fmul_rn(float a, float b) {
  return a * b;
}
inline float __fmaf_rn(float a, float b, float c) {
  return std::fma(a, b, c);
}
inline int __float2int_rn(float x) {
  return static_cast<int>(std::nearbyint(x));
}
inline int __float_as_int(float x) {
  int r;
  std::memcpy(&r, &x, 4);
  return r;
}
inline unsigned __float_as_uint(float x) {
  unsigned r;
  std::memcpy(&r, &x, 4);
  return r;
}
inline float __int_as_float(int x) {
  float r;
  std::memcpy(&r, &x, 4);
  return r;
}
inline float __uint_as_float(unsigned x) {
  float r;
  std::memcpy(&r, &x, 4);
  return r;
}
inline int __popc(unsigned x) {
  return __builtin_popcount(x);
}
inline int __popcll(unsigned long long x) {
  return __builtin_popcountll(x);
}
inline int __clz(int x) {
  return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x));
}
inline int __ffs(int x) {
  return __builtin_ffs(x);
}
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
inline int min(int a, int b) {
  return a < b ? a : b;
}
inline unsigned min(unsigned a, unsigned b) {
  return a < b ? a : b;
}
inline long long min(long long a, long long b) {
  return a < b ? a : b;
}
inline unsigned long long min(unsigned long long a, unsigned long long b) {
  return a < b ? a : b;
}
inline long min(long a, long b) {
  return a < b ? a : b;
}
inline unsigned long min(unsigned long a, unsigned long b) {
  return a < b ? a : b;
}
inline float min(float a, float b) {
  return std::fmin(a, b);
}
inline double min(double a, double b) {
  return std::fmin(a, b);
}
inline int max(int a, int b) {
  return a > b ? a : b;
}
inline unsigned max(unsigned a, unsigned b) {
  return a > b ? a : b;
}
inline long long max(long long a, long long b) {
  return a > b ? a : b;
}
inline unsigned long long max(unsigned long long a, unsigned long long b) {
  return a > b ? a : b;
}
inline long max(long a, long b) {
  return a > b ? a : b;
}
inline unsigned long max(unsigned long a, unsigned long b) {
  return a > b ? a : b;
}
inline float max(float a, float b) {
  return std::fmax(a, b);
}
inline double max(double a, double b) {
  return std::fmax(a, b);
}

// Cache-hinted loads and stores are plain accesses on the CPU.
template <class T>
T __ldg(const T* p) {
  return *p;
}
template <class T>
T __ldcg(const T* p) {
  return *p;
}
template <class T>
T __ldca(const T* p) {
  return *p;
}
template <class T>
T __ldcs(const T* p) {
  return *p;
}
template <class T>
T __ldlu(const T* p) {
  return *p;
}
template <class T>
void __stcg(T* p, T v) {
  *p = v;
}
template <class T>
void __stcs(T* p, T v) {
  *p = v;
}
template <class T>
void __stwb(T* p, T v) {
  *p = v;
}
template <class T>
void __stwt(T* p, T v) {
  *p = v;
}

// Dynamic shared memory of the running block (the launch's shmem argument, 128-byte aligned).
namespace tda::emu {
inline void* dynamic_shared_memory() {
  return detail::cur_block().dynamic_smem;
}
}  // namespace tda::emu
