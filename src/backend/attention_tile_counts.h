// Work accounting of the tiled attention kernels (tda bench attention --mode count): run a
// backend's forward on host inputs and read its tile counters; FLOP counts of the CUDA kernels'
// tile schedule.
#pragma once
#include <vector>

#include "backend/ops.h"

namespace tda {

struct AttnTiles {
  long long skipped = 0, total = 0;
  long long threshold = 0;  // entmax: the score tiles of its threshold pre-pass (data-dependent)
};

// Runs ops.attention_forward once on a (B = 1, H = 1) problem with host inputs q, k, v (and q2,
// k2, tau when the math uses them) and returns the forward's tile counters (entmax: the exact
// solver, alpha 1.5).
AttnTiles count_attention_tiles(Ops& ops, AttnMath math, int T, int Dqk, int Dv, float scale,
                                int power, float lambda, const std::vector<float>& q,
                                const std::vector<float>& k, const std::vector<float>& v,
                                const std::vector<float>& q2, const std::vector<float>& k2,
                                const std::vector<float>& tau);

// FLOPs of forward + backward per (b, h) as the tiled kernels schedule them (64 x 64 tiles up to
// the diagonal, masked entries computed): `dense` with every tile processed, `done` with
// `skipped` tiles doing only their score products (the liveness test) and nothing else. Entmax
// adds its pre-passes: the threshold's score tiles as counted (`threshold`: a few passes of the
// Newton search per block), and the c pass's scores and e = dO V^T (skipped tiles: scores only).
struct AttnFlops {
  double dense = 0, done = 0;
};
AttnFlops attention_flops(AttnMath math, int Dqk, int Dv, const AttnTiles& tiles);

}  // namespace tda
