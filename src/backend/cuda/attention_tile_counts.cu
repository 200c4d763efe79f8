// Tile counting and FLOP accounting of the tiled attention kernels (attention_tile_counts.h).
// Per 64 x 64 tile pair and view count V (1, or 2 for differential kinds), with Dk = Dqk:
//   forward:  scores 2 Dk V;  W V: 2 Dv (two accumulators for diff softmax: 4 Dv)
//   backward: scores 2 Dk V in the dq kernel and again in the dk/dv kernel; e = dO V^T 2 Dv in
//             each; dq 2 Dk V, dk 2 Dk V, dv 2 Dv
// A skipped tile pays its score products (every kernel computes them to test liveness; the
// dk/dv kernel a second time when the tile is alive, not counted) and nothing else.
#include "backend/cuda/attention_tile_counts.h"
#include "backend/cuda/common.h"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"

namespace tda::cuda {

namespace {
struct Buf {
  float* p = nullptr;
  explicit Buf(const std::vector<float>& h) {
    if (h.empty()) return;
    p = static_cast<float*>(device_alloc(h.size() * sizeof(float), "attention tile count inputs"));
    check(cudaMemcpy(p, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice),
          "count_attention_tiles copy");
  }
  explicit Buf(size_t n) {
    p = static_cast<float*>(device_alloc(n * sizeof(float), "attention tile count outputs"));
  }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  ~Buf() {
    if (p) cudaFree(p);
  }
};
}  // namespace

AttnTiles count_attention_tiles(AttnMath math, int T, int Dqk, int Dv, float scale, int power,
                                float lambda, const std::vector<float>& q,
                                const std::vector<float>& k, const std::vector<float>& v,
                                const std::vector<float>& q2, const std::vector<float>& k2,
                                const std::vector<float>& tau) {
  Buf dq(q), dk(k), dv(v), dq2(q2), dk2(k2), dtau(tau), out(size_t(T) * Dv), out2(size_t(T) * Dv),
      stats(2 * size_t(T)), dlambda(std::vector<float>{lambda});
  auto* cnt =
      static_cast<long long*>(device_alloc(3 * sizeof(long long), "attention tile counters"));
  check(cudaMemset(cnt, 0, 3 * sizeof(long long)), "count_attention_tiles memset");
  AttnArgs a;
  a.math = math;
  a.B = a.H = 1;
  a.T = T;
  a.Dqk = Dqk;
  a.Dv = Dv;
  a.scale = scale;
  a.power = power;
  a.lambda = dlambda.p;
  a.q = dq.p;
  a.k = dk.p;
  a.v = dv.p;
  a.q2 = dq2.p;
  a.k2 = dk2.p;
  a.tau = dtau.p;
  a.out = out.p;
  a.out2 = out2.p;
  a.stats = stats.p;
  a.tiles_skipped = cnt;
  a.tiles_total = cnt + 1;
  a.entmax_threshold_tiles = cnt + 2;
  attention_forward(a);
  long long h[3] = {0, 0, 0};
  check(cudaMemcpy(h, cnt, sizeof h, cudaMemcpyDeviceToHost), "count_attention_tiles copy");
  cudaFree(cnt);
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

}  // namespace tda::cuda
