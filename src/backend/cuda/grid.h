// Launch shapes of the kernels whose grids grow with the batch: a micro-batch may hold up to
// B*T = 2^22 tokens, and a grid may have at most 2^31 - 1 blocks in x but only 65,535 in y and z.
// So a dimension that grows with B, T, H or N goes to x, and what stays small (column blocks of
// C) to y. Host-only arithmetic, apart from the kernels, so tests can check the shapes at sizes
// no emulated run reaches (tests/test_cuda_grid.cpp).
#pragma once
#include <cstddef>

#include "backend/cuda/runtime.h"

namespace tda::cuda {

constexpr size_t kMaxGridX = 2147483647u;  // 2^31 - 1
constexpr size_t kMaxGridYZ = 65535u;

inline bool grid_fits(dim3 g) {
  return g.x >= 1 && g.x <= kMaxGridX && g.y >= 1 && g.y <= kMaxGridYZ && g.z >= 1 &&
         g.z <= kMaxGridYZ;
}

// Threads per block of a kernel with one thread per column: up to max_threads, but no whole warp
// idle when C is small (the head norms' C = 64).
inline int column_threads(size_t C, int max_threads) {
  const size_t warps = C > 32 ? (C + 31) / 32 : 1;
  return int(warps * 32 < size_t(max_threads) ? warps * 32 : size_t(max_threads));
}

// Two-stage column reductions over rows (RMSNorm's dw, the ReLA norm's dgamma/dw): one block
// per (chunk of rows, block of `threads` columns), chunks on x. Throws tda::Error when even x
// cannot hold the chunks.
dim3 chunk_column_grid(size_t chunks, size_t C, int threads, const char* what);

// Tiled attention kernels: one block per (tile of `tile` rows, b*h), tiles on x and b*h on y, or
// split over (y, z) when B*H passes 65,535 (at 2^22 tokens with short T): y = ceil(BH / z),
// z = ceil(BH / 65,535), and the kernels skip the < z blocks past B*H (attention_tc.cuh
// block_bh). Up to 65,535 sequences-heads the grid is the plain (tiles, B*H) one.
dim3 attention_tile_grid(int T, size_t BH, int tile, const char* what);

}  // namespace tda::cuda
