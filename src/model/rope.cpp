#include "model/rope.h"

#include <algorithm>
#include <cmath>

namespace tda {

size_t rope_table_floats(const ModelConfig& m, int T_max) {
  return size_t(T_max) * size_t(m.head_dim() / 2);
}

void build_rope_tables(const ModelConfig& m, int T_max, std::vector<float>& cos,
                       std::vector<float>& sin) {
  const int D = m.head_dim(), half = D / 2;
  const double theta = m.rope_theta * std::pow(m.rope_ntk_factor, double(D) / double(D - 2));
  cos.resize(rope_table_floats(m, T_max));
  sin.resize(rope_table_floats(m, T_max));
  for (int t = 0; t < T_max; ++t)
    for (int i = 0; i < half; ++i) {
      const double ang = t * std::pow(theta, -2.0 * i / D);
      cos[size_t(t) * half + i] = float(std::cos(ang));
      sin[size_t(t) * half + i] = float(std::sin(ang));
    }
}

int rope_trained_context(const ModelConfig& m) {
  return int(std::ceil(m.seq_len * std::max(1.0, m.rope_ntk_factor)));
}

}  // namespace tda
