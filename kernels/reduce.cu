// Deterministic reductions over many blocks (no atomics: the same input gives the same bits every
// run and under any block order, so a resumed run is bit-exact):
// - sum of squares (the gradient norm), in double: stage 1, block b sums x_i^2 over a fixed
//   grid-stride set of i (at most kBlocks blocks, always the same split for a given n) into
//   partial[b]; stage 2, one block sums those <= kBlocks partials in a fixed tree order.
// - column sums (the RMSNorm and ReLA-norm weight gradients' second stage): out[c] += sum_r
//   in[r ld + c] over rows in fixed groups, one block per (group, 32 columns), then the <= 256
//   group sums per column in one more pass, in order.
#include "backend/cuda/common.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/grid.h"
#include "backend/cuda/kernel_helpers.cuh"

namespace tda::cuda {

namespace {
constexpr int kThreads = 256;
constexpr int kBlocks = 512;
constexpr int kColumnTile = 32;  // columns per block (one warp's lanes)
constexpr int kRowLanes = 8;     // warps per block, each over every 8th row of the group
constexpr int kMaxGroups = 256;  // row groups of the first pass: the second pass's length

// partial[blockIdx.x] = sum_{i = blockIdx.x*blockDim.x + threadIdx.x (mod grid)} x_i^2
__global__ void sum_squares_partial_kernel(const float* x, size_t n, double* partial) {
  __shared__ double smem[32];
  double s = 0.0;
  TDA_GRID_STRIDE(i, n)
  s += double(x[i]) * double(x[i]);
  s = block_sum(s, smem);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// out = sum_b partial[b]
__global__ void sum_partials_kernel(const double* partial, int n, double* out) {
  __shared__ double smem[32];
  double s = 0.0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += partial[i];
  s = block_sum(s, smem);
  if (threadIdx.x == 0) *out = s;
}

// Block (g, t): columns c = 32 t + lane, rows [g rows_per_group, (g + 1) rows_per_group) of in
// (row stride ld); warp w sums every 8th row from the group's w-th, then warp 0 adds the 8 warps'
// sums in order. out[g ld_out + c] = that sum, or += it when accumulate (the last pass).
__global__ void __launch_bounds__(kColumnTile* kRowLanes)
    column_sum_kernel(float* out, size_t ld_out, const float* in, size_t ld, int rows, int C,
                      int rows_per_group, bool accumulate) {
  __shared__ float smem[kRowLanes][kColumnTile + 1];
  const int lane = threadIdx.x % kColumnTile, w = threadIdx.x / kColumnTile;
  const int c = blockIdx.y * kColumnTile + lane;
  const size_t g = blockIdx.x;
  const int r0 = int(g * rows_per_group), r1 = min(rows, r0 + rows_per_group);
  float s = 0.f;
  if (c < C)
    for (int r = r0 + w; r < r1; r += kRowLanes) s += in[size_t(r) * ld + c];
  smem[w][lane] = s;
  __syncthreads();
  if (w != 0 || c >= C) return;
  s = smem[0][lane];
  for (int k = 1; k < kRowLanes; ++k) s += smem[k][lane];
  float& o = out[g * ld_out + c];
  o = accumulate ? o + s : s;
}

int column_groups(int rows) {
  const int per = std::max(kColumnTile, (rows + kMaxGroups - 1) / kMaxGroups);
  return (rows + per - 1) / per;
}
}  // namespace

size_t sum_squares_scratch() {
  return kBlocks + 1;
}

double sum_squares(const float* x, size_t n, double* scratch) {
  if (n == 0) return 0.0;
  const unsigned blocks = grid_for(n, kThreads, kBlocks);
  check(
      launch<sum_squares_partial_kernel>(dim3(blocks), dim3(kThreads), 0, stream(), x, n, scratch),
      "sum_squares_partial");
  check(launch<sum_partials_kernel>(dim3(1), dim3(kThreads), 0, stream(),
                                    static_cast<const double*>(scratch), int(blocks),
                                    scratch + kBlocks),
        "sum_partials");
  double out = 0.0;
  check(cudaMemcpy(&out, scratch + kBlocks, sizeof(double), cudaMemcpyDeviceToHost),
        "sum_squares copy");
  return out;
}

size_t column_sum_scratch(int rows, int C) {
  return size_t(column_groups(rows)) * size_t(C);
}

void column_sum(float* out, const float* in, int rows, int C, size_t ld, float* scratch) {
  if (rows <= 0 || C <= 0) return;
  const int groups = column_groups(rows), per = (rows + groups - 1) / groups;
  const unsigned tiles = unsigned((C + kColumnTile - 1) / kColumnTile);
  const dim3 block(kColumnTile * kRowLanes);
  if (groups > 1) {
    check(launch<column_sum_kernel>(
              chunk_column_grid(size_t(groups), size_t(C), kColumnTile, "column_sum"), block, 0,
              stream(), scratch, size_t(C), in, ld, rows, C, per, false),
          "column_sum (groups)");
    in = scratch;
    ld = size_t(C);
    rows = groups;
  }
  check(launch<column_sum_kernel>(dim3(1, tiles), block, 0, stream(), out, size_t(0), in, ld, rows,
                                  C, rows, true),
        "column_sum");
}

}  // namespace tda::cuda
