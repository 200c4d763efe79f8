// Tile counting and FLOP accounting of the tiled attention kernels (attention_tile_counts.h).
// Per 64 x 64 tile pair and view count V (1, or 2 for differential kinds), with Dk = Dqk:
//   forward:  scores 2 Dk V;  W V: 2 Dv (two accumulators for diff softmax: 4 Dv)
//   backward: scores 2 Dk V in the dq kernel and again in the dk/dv kernel; e = dO V^T 2 Dv in
//             each; dq 2 Dk V, dk 2 Dk V, dv 2 Dv
// A skipped tile pays its score products (every kernel computes them to test liveness; the
// dk/dv kernel a second time when the tile is alive, not counted) and nothing else.
#include "backend/attention_tile_counts.h"

#include "backend/device_array.h"

namespace tda {

namespace {
// A backend copy of a host vector (none for an empty one: the math does not use it).
DeviceArray<float> on_backend(Ops& ops, const std::vector<float>& h) {
  DeviceArray<float> d;
  if (h.empty()) return d;
  d = DeviceArray<float>(ops, h.size(), "attention tile count inputs");
  d.upload(h.data(), h.size());
  return d;
}
}  // namespace

AttnTiles count_attention_tiles(Ops& ops, AttnMath math, int T, int Dqk, int Dv, float scale,
                                int power, float lambda, const std::vector<float>& q,
                                const std::vector<float>& k, const std::vector<float>& v,
                                const std::vector<float>& q2, const std::vector<float>& k2,
                                const std::vector<float>& tau) {
  DeviceArray<float> dq = on_backend(ops, q), dk = on_backend(ops, k), dv = on_backend(ops, v),
                     dq2 = on_backend(ops, q2), dk2 = on_backend(ops, k2),
                     dtau = on_backend(ops, tau), dlambda = on_backend(ops, {lambda});
  DeviceArray<float> out(ops, size_t(T) * Dv, "attention tile count outputs"),
      out2(ops, size_t(T) * Dv, "attention tile count outputs"),
      stats(ops, 2 * size_t(T), "attention tile count outputs");
  DeviceArray<long long> cnt(ops, 3, "attention tile counters");
  const long long zero[3] = {0, 0, 0};
  cnt.upload(zero, 3);
  AttnArgs a;
  a.math = math;
  a.B = a.H = 1;
  a.T = T;
  a.Dqk = Dqk;
  a.Dv = Dv;
  a.scale = scale;
  a.power = power;
  a.lambda = dlambda.data();
  a.q = dq.data();
  a.k = dk.data();
  a.v = dv.data();
  a.q2 = dq2.data();
  a.k2 = dk2.data();
  a.tau = dtau.data();
  a.out = out.data();
  a.out2 = out2.data();
  a.stats = stats.data();
  a.tiles_skipped = cnt.data();
  a.tiles_total = cnt.data() + 1;
  a.entmax_threshold_tiles = cnt.data() + 2;
  ops.attention_forward(a);
  long long h[3] = {0, 0, 0};
  cnt.download(h, 3);
  return AttnTiles{h[0], h[1], h[2]};
}

AttnFlops attention_flops(AttnMath math, int Dqk, int Dv, const AttnTiles& t) {
  const double V = attn_two_views(math) ? 2 : 1, pair = 64.0 * 64.0;
  const double acc = math == AttnMath::kDiffSoftmax ? 2 : 1;
  double score = 2 * Dqk * V * 3;  // forward, dq kernel, dk/dv kernel
  double rest = 2 * Dv * acc + 2 * 2 * Dv + 2 * Dqk * V * 2 + 2 * Dv;
  if (math == AttnMath::kEntmax) {
    score += 2.0 * Dqk;  // the c pass's scores
    rest += 2.0 * Dv;    // the c pass's e on live tiles
  }
  AttnFlops f;
  f.dense = double(t.total) * pair * (score + rest) + double(t.threshold) * pair * 2.0 * Dqk;
  f.done = f.dense - double(t.skipped) * pair * rest;
  return f;
}

}  // namespace tda
