// expf that the compiler can vectorize (glibc's vector expf needs -ffast-math, which would also
// let the compiler drop our NaN/Inf checks). Cody-Waite range reduction x = n ln2 + r,
// |r| <= ln2/2, then a degree-6 Taylor/Horner polynomial for e^r (relative error < 2e-7, i.e.
// about 1 ulp over the range used), and 2^n assembled in the exponent bits.
// Vectorising needs straight-line code: n is rounded with the 1.5 * 2^23 trick (floorf stays a
// libm call without -fno-trapping-math), and the underflow to 0 comes from the exponent bits
// (n = -127 gives the bits of +0), not from a test after the polynomial, which GCC turned into
// branches. Checked with -fopt-info-vec on the loops that call it.
#pragma once
#include <cstdint>
#include <cstring>

namespace tda {

inline float fast_expf(float x) {
  // Clamp to [-88, 88.7]; NaN lands on the low end (comparisons with NaN are false), so the
  // float->int conversion below never sees NaN. A NaN logit still makes the loss NaN through
  // the target logit, which the trainer reports. Below about -87.68 (n = -127) the result is
  // exactly 0 (what softmax wants); e^-87.3 is FLT_MIN.
  x = x > 88.7f ? 88.7f : x;
  x = x > -88.0f ? x : -88.0f;
  // Round to nearest (ties to even): adding 1.5 * 2^23 pushes the fraction bits out of the sum.
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (x - n * 0.693145751953125f) - n * 1.42860682030941723212e-6f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const uint32_t bits = uint32_t(int32_t(n) + 127) << 23;  // n = -127: 0, the bits of +0.0f
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

}  // namespace tda
