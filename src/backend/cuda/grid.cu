// Launch shapes of the batch-sized grids (grid.h).
#include <string>

#include "backend/cuda/grid.h"
#include "core/error.h"

namespace tda::cuda {

namespace {
dim3 checked(size_t x, size_t y, const char* what) {
  TDA_CHECK(x <= kMaxGridX && y <= kMaxGridYZ,
            std::string("cuda: ") + what + ": a grid of " + std::to_string(x) + " x " +
                std::to_string(y) + " blocks exceeds the device's limits (2^31-1 x 65535)");
  return dim3(unsigned(x < 1 ? 1 : x), unsigned(y < 1 ? 1 : y));
}
}  // namespace

dim3 chunk_column_grid(size_t chunks, size_t C, int threads, const char* what) {
  return checked(chunks, (C + size_t(threads) - 1) / size_t(threads), what);
}

dim3 attention_tile_grid(int T, size_t BH, int tile, const char* what) {
  const size_t tiles = (size_t(T) + size_t(tile) - 1) / size_t(tile);
  const size_t z = (BH + kMaxGridYZ - 1) / kMaxGridYZ, y = z ? (BH + z - 1) / z : 0;
  TDA_CHECK(z <= kMaxGridYZ, std::string("cuda: ") + what + ": " + std::to_string(BH) +
                                 " sequence-heads exceed the device's grid (65535^2)");
  dim3 g = checked(tiles, y, what);
  g.z = unsigned(z < 1 ? 1 : z);
  return g;
}

}  // namespace tda::cuda
