// expf that the compiler can vectorize (glibc's vector expf needs -ffast-math, which would also
// let the compiler drop our NaN/Inf checks). Cody-Waite range reduction x = n ln2 + r,
// |r| <= ln2/2, then a degree-6 Taylor/Horner polynomial for e^r (relative error < 2e-7, i.e.
// about 1 ulp over the range used), and 2^n assembled in the exponent bits.
#pragma once
#include <cstdint>
#include <cstring>

namespace tda {

inline float fast_expf(float x) {
  // Below -87.3 the result is under FLT_MIN: flush to 0 (what softmax wants); clamp the top.
  // Written so that NaN also lands on the low clamp (comparisons with NaN are false): the
  // float->int conversion below must never see NaN. A NaN logit still makes the loss NaN
  // through the target logit, which the trainer reports.
  x = x > 88.7f ? 88.7f : x;
  x = x > -87.3f ? x : -87.3f;
  const float n = __builtin_floorf(x * 1.44269504088896341f + 0.5f);
  const float r = (x - n * 0.693145751953125f) - n * 1.42860682030941723212e-6f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const uint32_t bits = uint32_t(int32_t(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return x <= -87.3f ? 0.0f : p * scale;
}

}  // namespace tda
