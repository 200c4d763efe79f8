// NTK-aware RoPE scaling (model.rope_ntk_factor, docs/long_context.md) checked against what it
// is meant to do rather than against its formula: with factor s and head dim D, the frequency of
// pair i is divided by s^(2i/(D-2)) -- pair 0 unchanged, the slowest pair (i = D/2-1) divided by
// exactly s, geometric in between. Angles are recovered from the cos/sin tables with atan2.
#include <catch2/catch.hpp>
#include <cmath>

#include "core/config.h"
#include "model/rope.h"

using namespace tda;

namespace {

ModelConfig rope_model(double theta, double s) {
  ModelConfig m{};
  m.n_layer = 1;
  m.d_model = 128;
  m.n_head = 2;  // D = 64, as in the paper's model
  m.seq_len = 64;
  m.rope_theta = theta;
  m.rope_ntk_factor = s;
  return m;
}

struct Tables {
  std::vector<float> cos, sin;
  int half;
  // Angle of pair i at position t, in (-pi, pi].
  double angle(int t, int i) const {
    const size_t k = size_t(t) * size_t(half) + size_t(i);
    return std::atan2(double(sin[k]), double(cos[k]));
  }
};

Tables tables(const ModelConfig& m, int T_max) {
  Tables t;
  t.half = m.head_dim() / 2;
  build_rope_tables(m, T_max, t.cos, t.sin);
  return t;
}

// Worst relative error of (frequency of pair i under `scaled`) / (unscaled frequency) against
// s^(-2i/(D-2)). Each frequency is read at the position where the unscaled angle is about 1 rad
// (inside (-pi, pi], and large enough that float tables give ~1e-7 relative accuracy).
double worst_ratio_error(const Tables& base, const Tables& scaled, double s, int D) {
  const double theta = 10000.0;
  double worst = 0;
  for (int i = 0; i < D / 2; ++i) {
    const int t = std::max(1, int(1.0 / std::pow(theta, -2.0 * i / D)));
    const double ratio = scaled.angle(t, i) / base.angle(t, i);
    const double want = std::pow(s, -2.0 * i / (D - 2));
    worst = std::max(worst, std::abs(ratio / want - 1));
  }
  return worst;
}

}  // namespace

TEST_CASE("rope: NTK factor s divides pair i's frequency by s^(2i/(D-2)) and s = 1 changes nothing",
          "[longctx][rope]") {
  const int D = 64, T_max = 8000;  // the slowest unscaled pair reaches 1 rad near t = 7500
  const Tables base = tables(rope_model(10000.0, 1.0), T_max);
  for (double s : {2.0, 4.0}) {
    INFO("s = " << s);
    const Tables ntk = tables(rope_model(10000.0, s), T_max);
    CHECK(worst_ratio_error(base, ntk, s, D) < 2e-6);
    // Pair 0 keeps its rotation at every position; the slowest pair at position s*t sits where
    // the unscaled one was at t (position interpolation for the lowest frequency).
    for (int t : {1, 7, 100, 999}) {
      CHECK(ntk.cos[size_t(t) * 32] == base.cos[size_t(t) * 32]);
      CHECK(ntk.sin[size_t(t) * 32] == base.sin[size_t(t) * 32]);
      const size_t a = size_t(int(s) * t) * 32 + 31, b = size_t(t) * 32 + 31;
      CHECK(ntk.cos[a] == Approx(base.cos[b]).margin(1e-6));
      CHECK(ntk.sin[a] == Approx(base.sin[b]).margin(1e-6));
    }
  }
  // Negative controls: the check tells NTK from the two look-alikes.
  const double s = 4.0;
  const Tables naive = tables(rope_model(10000.0 * s, 1.0), T_max);  // base x s
  CHECK(worst_ratio_error(base, naive, s, D) > 0.02);                // 4^(2/64) - 1 = 4.4%
  Tables pi = base;                                                  // positions / s (PI)
  for (int t = 0; t < T_max; ++t)
    for (int i = 0; i < 32; ++i) {
      const double ang = (t / s) * std::pow(10000.0, -2.0 * i / D);
      pi.cos[size_t(t) * 32 + size_t(i)] = float(std::cos(ang));
      pi.sin[size_t(t) * 32 + size_t(i)] = float(std::sin(ang));
    }
  CHECK(worst_ratio_error(base, pi, s, D) > 0.5);  // pair 0 slowed by 4x
  // The model's own table covers seq_len * s positions.
  CHECK(rope_trained_context(rope_model(10000.0, 4.0)) == 256);
  CHECK(rope_trained_context(rope_model(10000.0, 1.0)) == 64);
}
