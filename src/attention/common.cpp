#include "attention/common.h"

#include <algorithm>

namespace tda {
namespace attn_util {

void threshold_c(float* c, int T, double kappa, int d) {
  for (int i = 0; i < T; ++i) {
    // max(0, .) guards kappa > 1 (the released code hard-wires kappa = 1)
    const double l = std::max(0.0, std::log(double(i + 1) / kappa));
    c[i] = float(std::sqrt(2.0 * l / d));
  }
}

void upload_threshold(Ops& ops, float* dst, int T, double kappa, int d, float factor) {
  std::vector<float> c(size_t(std::max(T, 0)));
  threshold_c(c.data(), T, kappa, d);
  for (float& x : c) x *= factor;
  ops.upload(dst, c.data(), c.size() * sizeof(float));
}

}  // namespace attn_util
}  // namespace tda
