// Small deterministic RNG (SplitMix64 seeded xoshiro256**). Its whole state is four
// integers, so checkpoints save it exactly and resume is bit-exact.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>

namespace tda {

inline uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

struct Rng {
  std::array<uint64_t, 4> s{};
  explicit Rng(uint64_t seed = 0) { reseed(seed); }
  void reseed(uint64_t seed) {
    for (auto& w : s) w = splitmix64(seed);
  }
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t next_u64() {
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 24 random bits (exactly representable in fp32).
  float uniform() { return float(next_u64() >> 40) * (1.0f / 16777216.0f); }
  double uniform_double() { return double(next_u64() >> 11) * (1.0 / 9007199254740992.0); }
  uint64_t below(uint64_t n) { return next_u64() % n; }
  // Standard normal by Box-Muller (one value per call; simple and reproducible).
  float normal() {
    double u1 = uniform_double();
    double u2 = uniform_double();
    if (u1 < 1e-300) u1 = 1e-300;
    return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
};

// Fisher-Yates permutation of 0..n-1 driven by rng.
template <class Vec>
void shuffle_indices(Vec& idx, Rng& rng) {
  for (size_t i = idx.size(); i > 1; --i) {
    size_t j = size_t(rng.below(i));
    std::swap(idx[i - 1], idx[j]);
  }
}

}  // namespace tda
