// Helpers for the CUDA backend tests: random host data, device copies, error norms. The
// backend runs on the SIMT emulator here (docs/cuda.md), so "device" memory is host memory
// from the emulator's cudaMalloc (filled with NaN bytes: unwritten outputs show up).
#pragma once
#ifndef TDA_CUDA_EMU
#define TDA_CUDA_EMU 1
#endif
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/launch.h"
#include "test_emu_util.h"

namespace tda::cuda_test {

using emu_test::DeviceBuffer;
using emu_test::HostAccessGuard;
using emu_test::ScheduleSeed;

inline std::vector<float> rnd(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

inline std::vector<int32_t> tokens(size_t n, int32_t below, uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = int32_t(g() % uint32_t(below));
  return v;
}

// max_i |got_i - ref_i| / max(max_i |ref_i|, 1e-30): the error relative to the tensor's scale,
// so that entries near zero (sums that cancel) are judged against the whole tensor.
inline double rel_err(const std::vector<float>& got, const std::vector<float>& ref) {
  double num = 0.0, den = 1e-30;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num = std::max(num, std::fabs(double(got[i]) - double(ref[i])));
    den = std::max(den, std::fabs(double(ref[i])));
  }
  return num / den;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](float x, float y) {
           return std::memcmp(&x, &y, sizeof(float)) == 0;
         });
}

}  // namespace tda::cuda_test
