// SIMT emulator self-tests: scheduling and barriers, warp collectives against their scalar
// definitions, atomics, shared memory, grids, the runtime API and error reporting.
#include <catch2/catch.hpp>

#include "test_util.h"

#if __has_include(<cuda_bf16.h>)
#ifndef TDA_CUDA_EMU
#define TDA_CUDA_EMU 1
#endif
#include <cmath>
#include <cstdint>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "backend/cuda/launch.h"
#include "test_emu_util.h"

using tda::cuda::launch;
using tda::emu_test::DeviceBuffer;
using tda::emu_test::ScheduleSeed;

namespace {

// --- a missing barrier must change the answer -------------------------------------------------
template <bool kBarrier>
__global__ void tree_sum_kernel(const int* x, int* out) {
  __shared__ int s[128];
  const int t = threadIdx.x;
  s[t] = x[t];
  if (kBarrier) __syncthreads();  // the barrier under test: the loop reads other threads' s[]
  for (int stride = 64; stride > 0; stride >>= 1) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) *out = s[0];
}

// Thread t reads what thread t-1 wrote (thread 0 its own). Threads started in order get this
// right by luck, so only a shuffled schedule exposes the missing barrier.
template <bool kBarrier>
__global__ void shift_kernel(const int* x, int* y) {
  __shared__ int s[256];
  const int t = threadIdx.x;
  s[t] = x[t];
  if (kBarrier) __syncthreads();
  y[t] = s[t > 0 ? t - 1 : 0];
}

template <bool kBarrier>
bool tree_sum_is_right(uint64_t input_seed) {
  // Fresh input per run: static shared memory keeps the previous launch's contents, which must
  // not make a racy read come out right by accident.
  std::vector<int> x(128);
  for (int i = 0; i < 128; ++i) x[i] = static_cast<int>((input_seed * 131 + i * 7919) % 1000);
  DeviceBuffer<int> dx(x), dout(1);
  REQUIRE(launch<tree_sum_kernel<kBarrier>>(dim3(1), dim3(128), 0, nullptr, dx.get(), dout.get()) ==
          cudaSuccess);
  return dout.to_host()[0] == std::accumulate(x.begin(), x.end(), 0);
}

template <bool kBarrier>
bool shift_is_right(uint64_t input_seed) {
  const int n = 256;
  std::vector<int> x(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<int>(input_seed * 1000 + i);
  DeviceBuffer<int> dx(x), dy(n);
  REQUIRE(launch<shift_kernel<kBarrier>>(dim3(1), dim3(n), 0, nullptr, dx.get(), dy.get()) ==
          cudaSuccess);
  std::vector<int> y = dy.to_host();
  for (int i = 0; i < n; ++i)
    if (y[i] != x[i > 0 ? i - 1 : 0]) return false;
  return true;
}

}  // namespace

TEST_CASE("emu: a missing __syncthreads gives a wrong answer under the shuffled schedule",
          "[emu]") {
  const std::vector<uint64_t> seeds = {1, 2, 3, 4, 5, 6, 7, 8};
  int tree_wrong = 0, shift_wrong = 0;
  for (uint64_t seed : seeds) {
    ScheduleSeed guard(seed);
    CHECK(tree_sum_is_right<true>(seed));
    CHECK(shift_is_right<true>(seed));
    tree_wrong += !tree_sum_is_right<false>(seed);
    shift_wrong += !shift_is_right<false>(seed);
  }
  CHECK(tree_wrong > 0);
  CHECK(shift_wrong > 0);
  // The in-order schedule catches the first race but not the second: why the shuffle exists.
  ScheduleSeed in_order(0);
  CHECK(tree_sum_is_right<true>(99));
  CHECK_FALSE(tree_sum_is_right<false>(99));
  CHECK(shift_is_right<false>(99));
}

// --- __syncthreads_count / _and / _or -----------------------------------------------------------
namespace {
__global__ void sync_reduce_kernel(int* out) {
  const int t = threadIdx.x + threadIdx.y * blockDim.x;
  const int n = blockDim.x * blockDim.y;
  int r[6];
  r[0] = __syncthreads_count(t % 3 == 0);
  r[1] = __syncthreads_and(t < n);
  r[2] = __syncthreads_and(t != 50);
  r[3] = __syncthreads_or(t == n - 1);
  r[4] = __syncthreads_or(0);
  r[5] = __syncthreads_count(1);
  for (int i = 0; i < 6; ++i) out[t * 6 + i] = r[i];
}
}  // namespace

TEST_CASE("emu: __syncthreads_count/_and/_or over a 2D block", "[emu]") {
  for (uint64_t seed : {0, 11}) {
    ScheduleSeed guard(seed);
    const int n = 32 * 3;  // dim3(32, 3): three warps
    DeviceBuffer<int> out(n * 6);
    REQUIRE(launch<sync_reduce_kernel>(dim3(1), dim3(32, 3), 0, nullptr, out.get()) == cudaSuccess);
    std::vector<int> h = out.to_host();
    for (int t = 0; t < n; ++t) {
      CHECK(h[t * 6 + 0] == 32);
      CHECK(h[t * 6 + 1] == 1);
      CHECK(h[t * 6 + 2] == 0);
      CHECK(h[t * 6 + 3] == 1);
      CHECK(h[t * 6 + 4] == 0);
      CHECK(h[t * 6 + 5] == n);
    }
  }
}

// --- shuffles against the CUDA Programming Guide's definitions ----------------------------------
namespace {
constexpr int kWidths[] = {1, 2, 4, 8, 16, 32};
constexpr int kShflArgs = 40;  // source lanes / offsets 0..39: values >= width wrap or clamp

__global__ void shuffle_all_kernel(int* out) {
  const int lane = threadIdx.x;
  const int v = lane * 7 + 3;
  int idx = 0;
  for (int w : kWidths)
    for (int b = 0; b < kShflArgs; ++b) {
      out[(idx++) * 32 + lane] = __shfl_sync(0xffffffffu, v, b, w);
      out[(idx++) * 32 + lane] = __shfl_up_sync(0xffffffffu, v, b % 32, w);
      out[(idx++) * 32 + lane] = __shfl_down_sync(0xffffffffu, v, b % 32, w);
      out[(idx++) * 32 + lane] = __shfl_xor_sync(0xffffffffu, v, b % 32, w);
    }
}

int value_of(int lane) {
  return lane * 7 + 3;
}
// Written from the Programming Guide's prose, independently of the PTX formula the emulator uses.
int ref_idx(int lane, int src, int w) {
  return value_of(lane / w * w + src % w);
}
int ref_up(int lane, int d, int w) {
  return lane % w >= d ? value_of(lane - d) : value_of(lane);
}
int ref_down(int lane, int d, int w) {
  return lane % w + d < w ? value_of(lane + d) : value_of(lane);
}
int ref_xor(int lane, int m, int w) {
  const int src = lane ^ m;  // earlier segments may be read, later ones give the own value
  return src < (lane / w + 1) * w ? value_of(src) : value_of(lane);
}

__global__ void shuffle_types_kernel(double* d, float* f, unsigned long long* u, __nv_bfloat16* h) {
  const int lane = threadIdx.x;
  d[lane] = __shfl_xor_sync(0xffffffffu, lane + 0.25, 5);
  f[lane] = __shfl_down_sync(0xffffffffu, lane * 1.5f, 3);
  u[lane] =
      __shfl_sync(0xffffffffu, (1ull << 40) + static_cast<unsigned long long>(lane), 31 - lane);
  h[lane] = __shfl_up_sync(0xffffffffu, __float2bfloat16(static_cast<float>(lane)), 1);
}
}  // namespace

TEST_CASE("emu: shuffles match their scalar definitions for every width and offset", "[emu]") {
  for (uint64_t seed : {0, 5}) {
    ScheduleSeed guard(seed);
    const int count = 6 * kShflArgs * 4;
    DeviceBuffer<int> out(count * 32);
    REQUIRE(launch<shuffle_all_kernel>(dim3(1), dim3(32), 0, nullptr, out.get()) == cudaSuccess);
    std::vector<int> h = out.to_host();
    int idx = 0, mismatches = 0;
    for (int w : kWidths)
      for (int b = 0; b < kShflArgs; ++b) {
        for (int lane = 0; lane < 32; ++lane) {
          mismatches += h[(idx + 0) * 32 + lane] != ref_idx(lane, b, w);
          mismatches += h[(idx + 1) * 32 + lane] != ref_up(lane, b % 32, w);
          mismatches += h[(idx + 2) * 32 + lane] != ref_down(lane, b % 32, w);
          mismatches += h[(idx + 3) * 32 + lane] != ref_xor(lane, b % 32, w);
        }
        idx += 4;
      }
    CHECK(mismatches == 0);
  }
  DeviceBuffer<double> d(32);
  DeviceBuffer<float> f(32);
  DeviceBuffer<unsigned long long> u(32);
  DeviceBuffer<__nv_bfloat16> bf(32);
  REQUIRE(launch<shuffle_types_kernel>(dim3(1), dim3(32), 0, nullptr, d.get(), f.get(), u.get(),
                                       bf.get()) == cudaSuccess);
  auto hd = d.to_host();
  auto hf = f.to_host();
  auto hu = u.to_host();
  auto hb = bf.to_host();
  for (int lane = 0; lane < 32; ++lane) {
    CHECK(hd[lane] == (lane ^ 5) + 0.25);
    CHECK(hf[lane] == (lane + 3 < 32 ? lane + 3 : lane) * 1.5f);
    CHECK(hu[lane] == (1ull << 40) + static_cast<unsigned long long>(31 - lane));
    CHECK(__bfloat162float(hb[lane]) == static_cast<float>(lane >= 1 ? lane - 1 : lane));
  }
}

// --- votes, partial masks, warp reductions ----------------------------------------------------
namespace {
__global__ void vote_kernel(unsigned* out) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  unsigned* o = out + (warp * 32 + lane) * 8;
  o[0] = __ballot_sync(0xffffffffu, lane % 3 == 0);
  o[1] = __any_sync(0xffffffffu, lane == 17);
  o[2] = __all_sync(0xffffffffu, lane < 32);
  o[3] = __all_sync(0xffffffffu, lane != 9);
  // Two disjoint groups of the same warp in different branches complete independently.
  if (lane < 16) {
    o[4] = __ballot_sync(0x0000ffffu, lane % 2 == 1);
    o[5] = static_cast<unsigned>(__shfl_xor_sync(0x0000ffffu, lane, 8));
  } else {
    o[5] = static_cast<unsigned>(__shfl_xor_sync(0xffff0000u, lane, 8));
    o[4] = __ballot_sync(0xffff0000u, lane % 2 == 1);
  }
  if (lane % 2 == 0) {  // even lanes only, the source lane outside the group is never read
    o[6] = static_cast<unsigned>(__shfl_xor_sync(0x55555555u, lane * 10, 2));
    o[7] = __reduce_add_sync(0x55555555u, static_cast<unsigned>(lane));
  } else {
    o[6] = __any_sync(0xaaaaaaaau, lane == 31 && warp == 1);
    o[7] = __reduce_max_sync(0xaaaaaaaau, static_cast<unsigned>(lane * (warp + 1)));
  }
  __syncwarp();
}
}  // namespace

TEST_CASE("emu: votes and partial-mask collectives match scalar definitions", "[emu]") {
  for (uint64_t seed : {0, 9}) {
    ScheduleSeed guard(seed);
    DeviceBuffer<unsigned> out(64 * 8);
    REQUIRE(launch<vote_kernel>(dim3(1), dim3(64), 0, nullptr, out.get()) == cudaSuccess);
    auto h = out.to_host();
    unsigned every_third = 0, odd = 0;
    for (int l = 0; l < 32; ++l) every_third |= (l % 3 == 0 ? 1u : 0u) << l;
    for (int l = 0; l < 32; ++l) odd |= (l % 2 == 1 ? 1u : 0u) << l;
    const unsigned even_sum =
        0 + 2 + 4 + 6 + 8 + 10 + 12 + 14 + 16 + 18 + 20 + 22 + 24 + 26 + 28 + 30;
    for (int w = 0; w < 2; ++w)
      for (int l = 0; l < 32; ++l) {
        const unsigned* o = &h[(w * 32 + l) * 8];
        CHECK(o[0] == every_third);
        CHECK(o[1] == 1u);
        CHECK(o[2] == 1u);
        CHECK(o[3] == 0u);
        CHECK(o[4] == (l < 16 ? odd & 0x0000ffffu : odd & 0xffff0000u));
        CHECK(o[5] == static_cast<unsigned>(l ^ 8));
        if (l % 2 == 0) {
          CHECK(o[6] == static_cast<unsigned>((l ^ 2) * 10));
          CHECK(o[7] == even_sum);
        } else {
          CHECK(o[6] == (w == 1 ? 1u : 0u));
          CHECK(o[7] == 31u * static_cast<unsigned>(w + 1));
        }
      }
  }
}

// --- atomics from many threads of many blocks ---------------------------------------------------
namespace {
struct Counters {
  int add_int;
  float add_float;
  double add_double;
  unsigned long long add_u64;
  int max_int;
  int min_int;
  unsigned cas_count;
  int sub_int;
  unsigned or_bits;
  unsigned and_bits;
  unsigned xor_bits;
  int exch_slot;
};

__global__ void atomics_kernel(Counters* c, int* exch_old) {
  const int id = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(&c->add_int, 1);
  atomicAdd(&c->add_float, 1.0f);
  atomicAdd(&c->add_double, 0.5);
  atomicAdd(&c->add_u64, 1ull << 33);
  atomicMax(&c->max_int, (id * 37) % 1001);
  atomicMin(&c->min_int, 5000 - id);
  unsigned seen = c->cas_count, assumed;  // the classic CAS loop
  do {
    assumed = seen;
    seen = atomicCAS(&c->cas_count, assumed, assumed + 1);
  } while (seen != assumed);
  atomicSub(&c->sub_int, 2);
  atomicOr(&c->or_bits, 1u << (id % 32));
  atomicAnd(&c->and_bits, ~(1u << (id % 16)));
  atomicXor(&c->xor_bits, 1u << (id % 8));
  exch_old[id] = atomicExch(&c->exch_slot, id);
  __syncthreads();  // a scheduling point in the middle, so updates interleave across threads
  atomicAdd(&c->add_int, 1);
}
}  // namespace

TEST_CASE("emu: atomics from many threads and blocks", "[emu]") {
  const int blocks = 4, threads = 256, n = blocks * threads;
  for (uint64_t seed : {0, 3}) {
    ScheduleSeed guard(seed);
    Counters init{};
    init.max_int = -1;
    init.min_int = 1 << 30;
    init.and_bits = 0xffffffffu;
    init.exch_slot = -7;
    DeviceBuffer<Counters> c(std::vector<Counters>{init});
    DeviceBuffer<int> old(n);
    REQUIRE(launch<atomics_kernel>(dim3(blocks), dim3(threads), 0, nullptr, c.get(), old.get()) ==
            cudaSuccess);
    const Counters r = c.to_host()[0];
    CHECK(r.add_int == 2 * n);
    CHECK(r.add_float == static_cast<float>(n));  // integers below 2^24 add exactly
    CHECK(r.add_double == 0.5 * n);
    CHECK(r.add_u64 == static_cast<unsigned long long>(n) << 33);
    int max_ref = -1;
    for (int id = 0; id < n; ++id) max_ref = std::max(max_ref, (id * 37) % 1001);
    CHECK(r.max_int == max_ref);
    CHECK(r.min_int == 5000 - (n - 1));
    CHECK(r.cas_count == static_cast<unsigned>(n));
    CHECK(r.sub_int == -2 * n);
    CHECK(r.or_bits == 0xffffffffu);
    CHECK(r.and_bits == 0xffff0000u);
    CHECK(r.xor_bits == 0u);  // each bit flipped n/8 = 128 times
    // atomicExch hands every value on exactly once: olds + final == initial + all ids.
    const std::vector<int> olds = old.to_host();
    std::multiset<int> got(olds.begin(), olds.end());
    got.insert(r.exch_slot);
    std::multiset<int> want;
    want.insert(-7);
    for (int id = 0; id < n; ++id) want.insert(id);
    CHECK(got == want);
  }
}

// --- dynamic shared memory, grids ---------------------------------------------------------------
namespace {
__global__ void reverse_kernel(const float* x, float* y, float* unwritten) {
  TDA_DYNAMIC_SHARED(float, buf);
  const int t = threadIdx.x, n = blockDim.x;
  const float* xb = x + blockIdx.x * n;
  buf[t] = xb[t];
  __syncthreads();
  y[blockIdx.x * n + t] = buf[n - 1 - t];
  if (t == 0) unwritten[blockIdx.x] = buf[n];  // one float past what the block wrote
}

__global__ void coords_kernel(int* out) {
  const int bx = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const int tx = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const int nt = blockDim.x * blockDim.y * blockDim.z;
  int* o = out + (bx * nt + tx) * 6;
  o[0] = blockIdx.x, o[1] = blockIdx.y, o[2] = blockIdx.z;
  o[3] = threadIdx.x, o[4] = threadIdx.y, o[5] = threadIdx.z;
}

__global__ void big_smem_kernel(int* out) {
  TDA_DYNAMIC_SHARED(int, buf);
  buf[threadIdx.x] = 1;
  __syncthreads();
  if (threadIdx.x == 0) *out = buf[0];
}
}  // namespace

TEST_CASE("emu: dynamic shared memory is per block, sized by the launch, poisoned", "[emu]") {
  const int blocks = 3, n = 128;
  std::vector<float> x(blocks * n);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  DeviceBuffer<float> dx(x), dy(blocks * n), unwritten(blocks);
  REQUIRE(launch<reverse_kernel>(dim3(blocks), dim3(n), (n + 1) * sizeof(float), nullptr, dx.get(),
                                 dy.get(), unwritten.get()) == cudaSuccess);
  auto y = dy.to_host();
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < n; ++t) CHECK(y[b * n + t] == x[b * n + n - 1 - t]);
  for (float u : unwritten.to_host()) CHECK(std::isnan(u));  // never written: NaN, not 0

  // Over 48 KiB needs the opt-in attribute, as on the GPU.
  DeviceBuffer<int> out(1);
  const size_t big = 64 * 1024;
  CHECK(launch<big_smem_kernel>(dim3(1), dim3(32), big, nullptr, out.get()) ==
        cudaErrorInvalidValue);
  CHECK(cudaFuncSetAttribute(big_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(big)) == cudaSuccess);
  CHECK(launch<big_smem_kernel>(dim3(1), dim3(32), big, nullptr, out.get()) == cudaSuccess);
  CHECK(out.to_host()[0] == 1);
}

TEST_CASE("emu: a 3D grid of 3D blocks visits every coordinate once", "[emu]") {
  const dim3 grid(3, 2, 2), block(4, 3, 2);
  const int nb = 12, nt = 24;
  DeviceBuffer<int> out(nb * nt * 6);
  REQUIRE(launch<coords_kernel>(grid, block, 0, nullptr, out.get()) == cudaSuccess);
  auto h = out.to_host();
  std::set<std::vector<int>> seen;
  for (int i = 0; i < nb * nt; ++i) seen.insert(std::vector<int>(&h[i * 6], &h[i * 6 + 6]));
  CHECK(seen.size() == static_cast<size_t>(nb * nt));
  for (const auto& c : seen) {
    CHECK((c[0] < 3 && c[1] < 2 && c[2] < 2 && c[3] < 4 && c[4] < 3 && c[5] < 2));
  }
}

// --- runtime API --------------------------------------------------------------------------------
TEST_CASE("emu: runtime API round trips", "[emu]") {
  const size_t n = 1000;
  std::vector<float> a(n), b(n, -1.0f);
  std::iota(a.begin(), a.end(), 0.5f);
  float *d1 = nullptr, *d2 = nullptr;
  REQUIRE(cudaMalloc(&d1, n * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMalloc(&d2, n * sizeof(float)) == cudaSuccess);
  CHECK(reinterpret_cast<uintptr_t>(d1) % 256 == 0);
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  REQUIRE(cudaEventCreate(&start) == cudaSuccess);
  REQUIRE(cudaEventCreate(&stop) == cudaSuccess);
  CHECK(cudaEventRecord(start, stream) == cudaSuccess);
  CHECK(cudaMemcpy(d1, a.data(), n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaMemcpyAsync(d2, d1, n * sizeof(float), cudaMemcpyDeviceToDevice, stream) ==
        cudaSuccess);
  CHECK(cudaMemsetAsync(d1, 0, 10 * sizeof(float), stream) == cudaSuccess);
  CHECK(cudaEventRecord(stop, stream) == cudaSuccess);
  CHECK(cudaStreamSynchronize(stream) == cudaSuccess);
  CHECK(cudaEventSynchronize(stop) == cudaSuccess);
  float ms = -1.0f;
  CHECK(cudaEventElapsedTime(&ms, start, stop) == cudaSuccess);
  CHECK(ms >= 0.0f);
  CHECK(cudaMemcpy(b.data(), d2, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(b == a);
  CHECK(cudaMemcpy(b.data(), d1, n * sizeof(float), cudaMemcpyDefault) == cudaSuccess);
  CHECK(b[9] == 0.0f);
  CHECK(b[10] == a[10]);
  CHECK(cudaMemset(d1, 0xFF, n * sizeof(float)) == cudaSuccess);
  CHECK(cudaMemcpy(b.data(), d1, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(std::isnan(b[0]));

  // Errors other than kernel faults: kept until read, then cleared, with a name and a message.
  int not_device = 0;
  CHECK(cudaFree(&not_device) == cudaErrorInvalidValue);
  CHECK(cudaPeekAtLastError() == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(std::string(cudaGetErrorString(cudaErrorInvalidValue)) == "invalid argument");
  CHECK(std::string(cudaGetErrorName(cudaErrorLaunchFailure)) == "cudaErrorLaunchFailure");
  int count = 0, device = -1;
  CHECK(cudaGetDeviceCount(&count) == cudaSuccess);
  CHECK(count == 1);
  CHECK(cudaGetDevice(&device) == cudaSuccess);
  CHECK(device == 0);
  size_t free_bytes = 0, total_bytes = 0;
  CHECK(cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess);
  CHECK(free_bytes < total_bytes);

  CHECK(cudaEventDestroy(start) == cudaSuccess);
  CHECK(cudaEventDestroy(stop) == cudaSuccess);
  CHECK(cudaStreamDestroy(stream) == cudaSuccess);
  CHECK(cudaFree(d1) == cudaSuccess);
  CHECK(cudaFree(d2) == cudaSuccess);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

// --- bad kernels and configurations fail the launch with a message -----------------------------
namespace {
__global__ void deadlock_kernel(int* out) {
  if (threadIdx.x < 16)
    out[threadIdx.x] = __shfl_sync(0xffffffffu, 1, 0);  // waits for lanes 16..31 ...
  else
    __syncthreads();  // ... which wait here
}
__global__ void exited_lane_kernel(int* out) {
  if (threadIdx.x >= 30) return;
  out[threadIdx.x] = __shfl_down_sync(0xffffffffu, static_cast<int>(threadIdx.x), 1);
}
__global__ void noop_kernel(int* out) {
  out[threadIdx.x] = 1;
}
}  // namespace

TEST_CASE("emu: deadlocks, bad warp masks and bad configurations fail the launch", "[emu]") {
  {
    // A fault in a kernel loses the context: every call fails until cudaDeviceReset.
    tda::emu_test::ResetDeviceAtExit reset;
    DeviceBuffer<int> out(64);
    CHECK(launch<deadlock_kernel>(dim3(1), dim3(32), 0, nullptr, out.get()) ==
          cudaErrorLaunchFailure);
    CHECK_THAT(tda::emu::last_error_message(),
               Catch::Contains("deadlock_kernel") && Catch::Contains("deadlock"));
    CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
  }
  {
    tda::emu_test::ResetDeviceAtExit reset;
    DeviceBuffer<int> out(64);
    CHECK(launch<exited_lane_kernel>(dim3(1), dim3(32), 0, nullptr, out.get()) ==
          cudaErrorLaunchFailure);
    CHECK_THAT(tda::emu::last_error_message(), Catch::Contains("exit"));
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
  }
  // A bad configuration only fails its launch.
  DeviceBuffer<int> out(64);
  CHECK(launch<noop_kernel>(dim3(1), dim3(2048), 0, nullptr, out.get()) ==
        cudaErrorInvalidConfiguration);
  CHECK(launch<noop_kernel>(dim3(0), dim3(32), 0, nullptr, out.get()) ==
        cudaErrorInvalidConfiguration);
  CHECK_THAT(tda::emu::last_error_message(),
             Catch::Contains("noop_kernel") && Catch::Contains("grid (0,1,1)"));
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(launch<noop_kernel>(dim3(1), dim3(64), 0, nullptr, out.get()) == cudaSuccess);
  CHECK(out.to_host()[63] == 1);
}

namespace {
[[maybe_unused]] const bool kTestKernelsDeclared = tda::emu_test::declare_test_kernels<
    tree_sum_kernel<true>, tree_sum_kernel<false>, shift_kernel<true>, shift_kernel<false>,
    sync_reduce_kernel, shuffle_all_kernel, shuffle_types_kernel, vote_kernel, atomics_kernel,
    reverse_kernel, coords_kernel, big_smem_kernel, deadlock_kernel, exited_lane_kernel,
    noop_kernel>();
}  // namespace

#else
TEST_CASE("emu: skipped, the CUDA toolkit headers are not on the include path", "[emu]") {
  TDA_SKIP("tests/test_emu*.cpp need cuda_bf16.h (CUDA toolkit include directory)");
}
#endif
