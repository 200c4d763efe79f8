// The CPU backend's one vector type, for the kernels whose loops the compiler does not
// vectorise by itself (dot products inside tiles, accumulators that must stay in registers).
// Vec holds kLanes floats as a GCC/Clang vector extension: 16 where the compiler may use
// AVX-512, 8 with AVX, else 4 (SSE on any x86-64, NEON on aarch64). The width follows the
// compile flags, not the running CPU: build/ is -march=native, the CUDA build's host code is
// x86-64-v2 (SSE4.2; CMakeLists.txt, scripts/check_portable.sh), so nothing here needs a runtime
// dispatch and nothing in a portable build uses AVX. Arithmetic is the compiler's: a * b + c
// becomes an FMA where the target has one, as GCC does in the scalar code (-ffp-contract=fast).
#pragma once
#include <cstring>

namespace tda {
namespace simd {

#if defined(__AVX512F__)
constexpr int kLanes = 16;
#elif defined(__AVX__)
constexpr int kLanes = 8;
#else
constexpr int kLanes = 4;
#endif

typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));

// Unaligned loads and stores (memcpy compiles to one vector move).
inline Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, Vec v) {
  std::memcpy(p, &v, sizeof v);
}

}  // namespace simd
}  // namespace tda
