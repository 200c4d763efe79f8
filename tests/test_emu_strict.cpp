// The emulator's strict mode (docs/emulator.md), one planted bug per check: each is caught with
// one line naming the kernel or call, the argument and the sizes, and the launch or call fails;
// the same launch without the bug passes (the rest of the suite, which runs strict, is the wider
// negative control). Sticky errors: after a kernel fault every call fails until cudaDeviceReset.
#include <catch2/catch.hpp>

#include "test_util.h"

#if __has_include(<cuda_bf16.h>)
#ifndef TDA_CUDA_EMU
#define TDA_CUDA_EMU 1
#endif
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "backend/cuda/common.h"
#include "backend/cuda/kernel_helpers.cuh"
#include "backend/cuda/launch.h"
#include "backend/ops.h"
#include "test_emu_util.h"

using tda::cuda::launch;
using tda::emu_test::DeviceBuffer;
using tda::emu_test::ResetDeviceAtExit;
using tda::emu_test::ScheduleSeed;
using tda::emu_test::StrictMode;

namespace {

__global__ void smem_kernel(int* out) {
  TDA_DYNAMIC_SHARED(int, s);
  s[threadIdx.x] = int(threadIdx.x);
  __syncthreads();
  if (threadIdx.x == 0) *out = s[blockDim.x - 1];
}
__global__ void register_hungry_kernel(int* out) {
  out[threadIdx.x] = 1;
}
__global__ void unlisted_kernel(int* out) {
  out[threadIdx.x] = 1;
}
__global__ void scale_kernel(float* x, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] *= 2.0f;
}
__global__ void attn_args_kernel(tda::AttnArgs a) {
  if (threadIdx.x == 0 && a.out) a.out[0] = a.q ? a.q[0] : 0.0f;
}
struct Unlisted {
  int n;
  float* x;
};
__global__ void unlisted_struct_kernel(Unlisted u) {
  if (threadIdx.x == 0) u.x[0] = float(u.n);
}
// Block b continues block b-1's sum: right only if blocks run in order. Nothing in CUDA orders
// blocks, so this is a race that only a shuffled block order exposes.
__global__ void chain_kernel(int* out) {
  if (threadIdx.x != 0) return;
  const unsigned b = blockIdx.x;
  out[b] = (b == 0 ? 0 : out[b - 1]) + 1;
}
// Writes one element past n: into the allocation's tail, or past the dynamic shared memory.
__global__ void off_by_one_kernel(float* x, int n) {
  for (int i = int(threadIdx.x); i <= n; i += int(blockDim.x)) x[i] = 1.0f;
}
__global__ void smem_off_by_one_kernel(int n) {
  TDA_DYNAMIC_SHARED(float, s);
  for (int i = int(threadIdx.x); i <= n; i += int(blockDim.x)) s[i] = 1.0f;
}

// 16-byte loads from x + off, 8-byte stores to y + off (kernel_helpers.cuh): aligned only for off %
// 4 == 0.
__global__ void vector_copy_kernel(const float* x, float* y, int off) {
  const float4 v = tda::cuda::load_float4(x + off + 4 * int(threadIdx.x));
  uint32_t lo, hi;
  std::memcpy(&lo, &v.x, 4);
  std::memcpy(&hi, &v.y, 4);
  tda::cuda::store_u32x2(y + off + 4 * int(threadIdx.x), lo, hi);
}

using tda::emu::LaunchResources;
[[maybe_unused]] const bool kTestKernelsDeclared =
    tda::emu_test::declare_test_kernels<scale_kernel, attn_args_kernel, unlisted_struct_kernel,
                                        chain_kernel, off_by_one_kernel, smem_off_by_one_kernel,
                                        vector_copy_kernel>();

std::string last() {
  return tda::emu::last_error_message();
}

}  // namespace

TEST_CASE("strict: kernel names are c++filt's names of the nvcc entries", "[emu][strict]") {
  CHECK(tda::emu::kernel_name<scale_kernel>() == "(anonymous namespace)::scale_kernel");
  CHECK(
      tda::emu::detail::kernel_key("void tda::cuda::(anonymous namespace)::k<64, 128u>(float*)") ==
      "tda::cuda::(anonymous namespace)::k<64, 128u>");
  CHECK(tda::emu::detail::kernel_key("&(void (anonymous namespace)::k<true>(tda::AttnArgs))") ==
        "(anonymous namespace)::k<true>");
  CHECK(tda::emu::detail::kernel_key("tda::cuda::(anonymous namespace)::plain(float*, int)") ==
        "tda::cuda::(anonymous namespace)::plain");
}

TEST_CASE("strict: launch_resources.py makes the table from ptxas's report, and finds it stale",
          "[emu][strict]") {
  // Two kernels as build_cuda.sh logs them: a template in an anonymous namespace with static
  // shared memory on sm_90 only, and one with __launch_bounds__(256) (the PTX's .maxntid).
  const std::string rope =
      "_ZN3tda4cuda39_GLOBAL__N__d181ebb8_7_rope_cu_69e204fe11rope_kernelILb1EEEvPfS3_iiPKfS5_"
      "iiiii";
  const std::string sum = "_ZN3tda4cuda8selftest16block_sum_kernelEPKfPfi";
  auto report = [&](int rope_regs_sm90) {
    return "nvcc: Cuda compilation tools, release 13.0, V13.0.88\n"
           "ptxas info    : Compiling entry function '" +
           rope +
           "' for 'sm_80'\n"
           "ptxas info    : Used 28 registers, used 0 barriers, 412 bytes cmem[0]\n"
           "ptxas info    : Compiling entry function '" +
           rope +
           "' for 'sm_90'\n"
           "ptxas info    : Used " +
           std::to_string(rope_regs_sm90) +
           " registers, used 1 barriers, 256 bytes smem, 412 bytes cmem[0]\n"
           "ptxas info    : Compiling entry function '" +
           sum +
           "' for 'sm_80'\n"
           "ptxas info    : Used 12 registers, used 1 barriers, 372 bytes cmem[0]\n"
           "ptxas info    : Compiling entry function '" +
           sum +
           "' for 'sm_90'\n"
           "ptxas info    : Used 14 registers, used 1 barriers\n"
           "ptx: sm_80 maxntid 256 1 1 " +
           sum +
           "\n"
           "ptx: sm_90 maxntid 256 1 1 " +
           sum + "\n";
  };
  tda::TempDir dir;
  const std::string log = dir.path + "/ptxas.log", table = dir.path + "/table.h";
  const std::string script = "python3 " + tda::source_dir() + "/scripts/launch_resources.py ";
  tda::write_text(log, report(30));
  std::string out;
  REQUIRE(tda::run_command(script + "--write " + log + " --header " + table, &out) == 0);
  std::ifstream in(table);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_THAT(
      text,
      Catch::Contains(
          R"({"tda::cuda::(anonymous namespace)::rope_kernel<true>", 28, 0, 30, 256, 1024},)"));
  CHECK_THAT(text,
             Catch::Contains(R"({"tda::cuda::selftest::block_sum_kernel", 12, 0, 14, 0, 256},)"));
  // The emulator names the kernel the same way from its own (host) symbol.
  CHECK(tda::emu::detail::kernel_key(tda::emu::detail::demangle(rope.c_str())) ==
        "tda::cuda::(anonymous namespace)::rope_kernel<true>");
  CHECK(tda::run_command(script + "--check " + log + " --header " + table, &out) == 0);
  tda::write_text(log, report(40));  // a kernel changed: the committed table is stale
  CHECK(tda::run_command(script + "--check " + log + " --header " + table, &out) == 1);
  CHECK_THAT(out, Catch::Contains("is stale") && Catch::Contains("--write") &&
                      Catch::Contains("rope_kernel<true>\", 28, 0, 40, 256, 1024"));
}

TEST_CASE("strict: shared memory over 48 KiB without opt-in, and over the arch's opt-in limit",
          "[emu][strict]") {
  StrictMode strict;
  // 8 KiB of static shared memory (a fixture: nvcc never compiles this kernel).
  tda::emu::set_launch_resources<smem_kernel>(LaunchResources{{32, 32}, {8192, 8192}, 1024});
  DeviceBuffer<int> out(1);
  // 44 KiB dynamic is under the driver's 48 KiB for dynamic alone, but static + dynamic is not.
  const size_t dyn = 44 * 1024;
  CHECK(launch<smem_kernel>(dim3(1), dim3(64), dyn, nullptr, out.get()) == cudaErrorInvalidValue);
  CHECK_THAT(last(), Catch::Contains("smem_kernel") && Catch::Contains("45,056 bytes of dynamic") &&
                         Catch::Contains("8,192 of static") && Catch::Contains("49,152"));
  {
    StrictMode off(false);  // the check is strict mode's: a bare emulator lets it through
    CHECK(launch<smem_kernel>(dim3(1), dim3(64), dyn, nullptr, out.get()) == cudaSuccess);
  }
  // Opted in to 160 KiB: with the static 8 KiB over sm_80's 163 KiB (sm_90 would take it).
  REQUIRE(cudaFuncSetAttribute(smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               160 * 1024) == cudaSuccess);
  CHECK(launch<smem_kernel>(dim3(1), dim3(64), 100 * 1024, nullptr, out.get()) ==
        cudaErrorInvalidValue);
  CHECK_THAT(last(), Catch::Contains("smem_kernel") && Catch::Contains("163,840") &&
                         Catch::Contains("sm_80") && Catch::Contains("166,912"));
  // Within both archs' limits: runs.
  REQUIRE(cudaFuncSetAttribute(smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               150 * 1024) == cudaSuccess);
  CHECK(launch<smem_kernel>(dim3(1), dim3(64), 100 * 1024, nullptr, out.get()) == cudaSuccess);
  CHECK(out.to_host()[0] == 63);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);  // not sticky: read and cleared
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("strict: registers x threads over the register file, launch bounds, missing entries",
          "[emu][strict]") {
  StrictMode strict;
  DeviceBuffer<int> out(1024);
  // ptxas would give this kernel 128 registers on sm_80 and 255 on sm_90 (a fixture).
  tda::emu::set_launch_resources<register_hungry_kernel>(LaunchResources{{128, 255}, {0, 0}, 1024});
  CHECK(launch<register_hungry_kernel>(dim3(1), dim3(512), 0, nullptr, out.get()) ==
        cudaErrorLaunchOutOfResources);
  CHECK_THAT(last(), Catch::Contains("register_hungry_kernel") && Catch::Contains("512 threads") &&
                         Catch::Contains("255 registers") && Catch::Contains("sm_90") &&
                         Catch::Contains("131,072") && Catch::Contains("65,536"));
  {
    StrictMode off(false);  // the bare emulator runs it
    CHECK(launch<register_hungry_kernel>(dim3(1), dim3(512), 0, nullptr, out.get()) == cudaSuccess);
  }
  // 256 threads x 255 (rounded to 256 per thread) fill the file exactly.
  CHECK(launch<register_hungry_kernel>(dim3(1), dim3(256), 0, nullptr, out.get()) == cudaSuccess);
  // __launch_bounds__(128) (the PTX's .maxntid): 256 threads are refused.
  tda::emu::set_launch_resources<register_hungry_kernel>(LaunchResources{{32, 32}, {0, 0}, 128});
  CHECK(launch<register_hungry_kernel>(dim3(1), dim3(256), 0, nullptr, out.get()) ==
        cudaErrorLaunchOutOfResources);
  CHECK_THAT(last(), Catch::Contains("256 threads per block exceed its __launch_bounds__ of 128"));
  CHECK(launch<register_hungry_kernel>(dim3(1), dim3(128), 0, nullptr, out.get()) == cudaSuccess);
  // A kernel nvcc did not report (no table entry) cannot dodge the checks.
  CHECK(launch<unlisted_kernel>(dim3(1), dim3(32), 0, nullptr, out.get()) ==
        cudaErrorInvalidDeviceFunction);
  CHECK_THAT(last(), Catch::Contains("unlisted_kernel") &&
                         Catch::Contains("no entry in the launch-resource table") &&
                         Catch::Contains("launch_resources.py"));
  (void)cudaGetLastError();
}

TEST_CASE("strict: a host pointer passed to a kernel, directly and inside an argument struct",
          "[emu][strict]") {
  StrictMode strict;
  std::vector<float> host(64, 1.0f);
  {
    ResetDeviceAtExit reset;  // a bad pointer is a fault: the context is lost until the reset
    CHECK(launch<scale_kernel>(dim3(1), dim3(64), 0, nullptr, host.data(), 64) ==
          cudaErrorIllegalAddress);
    CHECK_THAT(last(), Catch::Contains("scale_kernel") && Catch::Contains("argument 0 (float*)") &&
                           Catch::Contains("not device memory"));
    CHECK(host[0] == 1.0f);  // refused before it ran
  }
  {
    StrictMode off(false);  // the bare emulator runs it on host memory, as no GPU would
    CHECK(launch<scale_kernel>(dim3(1), dim3(64), 0, nullptr, host.data(), 64) == cudaSuccess);
    CHECK(host[0] == 2.0f);
  }
  {
    ResetDeviceAtExit reset;
    DeviceBuffer<float> out(1), q(4);
    tda::AttnArgs a;
    a.out = out.get();
    a.q = q.get();
    CHECK(launch<attn_args_kernel>(dim3(1), dim3(32), 0, nullptr, a) == cudaSuccess);
    a.q = host.data();
    CHECK(launch<attn_args_kernel>(dim3(1), dim3(32), 0, nullptr, a) == cudaErrorIllegalAddress);
    CHECK_THAT(last(), Catch::Contains("attn_args_kernel") &&
                           Catch::Contains("argument 0 (tda::AttnArgs) member q") &&
                           Catch::Contains("not device memory"));
  }
  {
    // A struct whose pointers are not declared with device_pointers(): refused as soon as one of
    // its words is a device address, so that its other pointers cannot go unchecked.
    ResetDeviceAtExit reset;
    DeviceBuffer<float> x(4);
    CHECK(launch<unlisted_struct_kernel>(dim3(1), dim3(32), 0, nullptr, Unlisted{3, x.get()}) ==
          cudaErrorIllegalAddress);
    CHECK_THAT(last(), Catch::Contains("Unlisted") && Catch::Contains("byte offset 8") &&
                           Catch::Contains("device_pointers()"));
  }
}

TEST_CASE("strict: a bf16 GEMM operand that is not 16-byte aligned", "[emu][strict][cuda]") {
  StrictMode strict;
  ResetDeviceAtExit reset;
  const int M = 8, N = 8, K = 16;
  DeviceBuffer<__nv_bfloat16> a(M * K + 8), b(N * K);
  DeviceBuffer<float> c(M * N);
  std::vector<__nv_bfloat16> ones(M * K + 8, __float2bfloat16(1.0f));
  REQUIRE(cudaMemcpy(a.get(), ones.data(), ones.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemcpy(b.get(), ones.data(), N * K * 2, cudaMemcpyHostToDevice) == cudaSuccess);
  // From 16 bytes in: aligned, fine.
  tda::cuda::gemm(false, true, M, N, K, 1.0f, a.get() + 8, K, b.get(), K, 0.0f, c.get(), N);
  CHECK(c.to_host()[0] == float(K));
  // One element (2 bytes) in: refused, naming the operand, its shape and the alignment.
  CHECK_THROWS_WITH(
      tda::cuda::gemm(false, true, M, N, K, 1.0f, a.get() + 1, K, b.get(), K, 0.0f, c.get(), N),
      Catch::Contains("gemm") && Catch::Contains("operand A (bf16, 8x16, ld 16)") &&
          Catch::Contains("2-byte aligned") && Catch::Contains("needs 16"));
  {
    StrictMode off(false);
    CHECK_NOTHROW(
        tda::cuda::gemm(false, true, M, N, K, 1.0f, a.get() + 1, K, b.get(), K, 0.0f, c.get(), N));
  }
  // Past the end of its allocation: a fault, as a GPU's out-of-bounds read would be.
  CHECK_THROWS_WITH(tda::cuda::gemm(false, true, M, N, K + 8, 1.0f, b.get(), K + 8, b.get(), K + 8,
                                    0.0f, c.get(), N),
                    Catch::Contains("operand A (bf16, 8x24, ld 24)") &&
                        Catch::Contains("past the end") && Catch::Contains("256-byte allocation"));
}

TEST_CASE("strict: a race between blocks that only the shuffled block order exposes",
          "[emu][strict]") {
  StrictMode strict;
  const int blocks = 64;
  std::vector<int> want(blocks);
  for (int b = 0; b < blocks; ++b) want[b] = b + 1;
  DeviceBuffer<int> out(blocks);
  REQUIRE(launch<chain_kernel>(dim3(blocks), dim3(32), 0, nullptr, out.get()) == cudaSuccess);
  CHECK(out.to_host() == want);  // in order, the race goes unseen
  int wrong = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    ScheduleSeed s(seed);
    REQUIRE(cudaMemset(out.get(), 0, blocks * sizeof(int)) == cudaSuccess);
    REQUIRE(launch<chain_kernel>(dim3(blocks), dim3(32), 0, nullptr, out.get()) == cudaSuccess);
    wrong += out.to_host() != want;
  }
  CHECK(wrong == 4);
}

// A GPU faults on a misaligned vector access; a host compiler would let it pass, so the vector
// helpers (kernel_helpers.cuh) ask the emulator to check.
TEST_CASE("emu: a misaligned 16-byte load fails the kernel, the aligned one copies", "[emu]") {
  DeviceBuffer<float> x(64), y(64);
  std::vector<float> h(64);
  for (int i = 0; i < 64; ++i) h[i] = float(i) + 0.5f;
  REQUIRE(cudaMemcpy(x.get(), h.data(), 64 * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(launch<vector_copy_kernel>(dim3(1), dim3(8), 0, nullptr, x.get(), y.get(), 4) ==
          cudaSuccess);
  const std::vector<float> got = y.to_host();
  for (int t = 0; t < 8; ++t) {
    CHECK(got[4 + 4 * t] == h[4 + 4 * t]);
    CHECK(got[5 + 4 * t] == h[5 + 4 * t]);
  }
  ResetDeviceAtExit reset;
  CHECK(launch<vector_copy_kernel>(dim3(1), dim3(8), 0, nullptr, x.get(), y.get(), 2) !=
        cudaSuccess);
  CHECK_THAT(last(), Catch::Contains("misaligned 16-byte vector access") &&
                         Catch::Contains("vector_copy_kernel"));
}

TEST_CASE("strict: writes into an allocation's tail and past the dynamic shared memory",
          "[emu][strict]") {
  StrictMode strict;
  {
    ResetDeviceAtExit reset;
    DeviceBuffer<float> x(100);  // 400 bytes, exactly
    CHECK(launch<off_by_one_kernel>(dim3(1), dim3(32), 0, nullptr, x.get(), 100) ==
          cudaErrorIllegalAddress);
    CHECK_THAT(last(), Catch::Contains("kernel (anonymous namespace)::off_by_one_kernel wrote past "
                                       "the end of a 400-byte allocation") &&
                           Catch::Contains("bytes 0 to 3 after its end"));
  }
  {
    DeviceBuffer<float> x(101);
    CHECK(launch<off_by_one_kernel>(dim3(1), dim3(32), 0, nullptr, x.get(), 100) == cudaSuccess);
  }
  {
    StrictMode off(false);  // unseen by the bare emulator
    DeviceBuffer<float> x(100);
    CHECK(launch<off_by_one_kernel>(dim3(1), dim3(32), 0, nullptr, x.get(), 100) == cudaSuccess);
  }
  {
    ResetDeviceAtExit reset;
    CHECK(launch<smem_off_by_one_kernel>(dim3(2), dim3(32), 64 * sizeof(float), nullptr, 64) ==
          cudaErrorIllegalAddress);
    CHECK_THAT(last(), Catch::Contains("smem_off_by_one_kernel") &&
                           Catch::Contains("wrote past its 256 bytes of dynamic shared memory"));
  }
  CHECK(launch<smem_off_by_one_kernel>(dim3(2), dim3(32), 65 * sizeof(float), nullptr, 64) ==
        cudaSuccess);
  {
    // Off by one in a memset: refused before it writes.
    DeviceBuffer<float> x(100);
    CHECK(cudaMemset(x.get(), 0, 401) == cudaErrorInvalidValue);
    CHECK_THAT(last(), Catch::Contains("cudaMemset(401 bytes)") &&
                           Catch::Contains("runs 1 bytes past the end of a 400-byte allocation"));
    (void)cudaGetLastError();
  }
}

TEST_CASE("strict: a use after cudaFree, in a kernel and in a memcpy", "[emu][strict]") {
  StrictMode strict;
  float* p = nullptr;
  REQUIRE(cudaMalloc(&p, 256 * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaFree(p) == cudaSuccess);
  std::vector<float> host(256);
  CHECK(cudaMemcpy(host.data(), p, 1024, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
  CHECK_THAT(last(), Catch::Contains("cudaMemcpy(DeviceToHost, 1024 bytes): src") &&
                         Catch::Contains("1024-byte allocation") &&
                         Catch::Contains("freed by cudaFree (use after free)"));
  CHECK(cudaFree(p) == cudaErrorInvalidValue);
  CHECK_THAT(last(), Catch::Contains("freed twice"));
  {
    // A host buffer on the device side of a copy, and a device buffer on the host side.
    DeviceBuffer<float> d(256);
    CHECK(cudaMemcpy(host.data(), host.data() + 1, 4, cudaMemcpyHostToDevice) ==
          cudaErrorInvalidValue);
    CHECK_THAT(last(), Catch::Contains("cudaMemcpy(HostToDevice, 4 bytes): dst") &&
                           Catch::Contains("not device memory"));
    CHECK(cudaMemcpy(d.get(), d.get() + 1, 4, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
    CHECK_THAT(last(), Catch::Contains("src") &&
                           Catch::Contains("is device memory, but the kind says host"));
    (void)cudaGetLastError();
  }
  ResetDeviceAtExit reset;
  CHECK(launch<scale_kernel>(dim3(1), dim3(64), 0, nullptr, p, 64) == cudaErrorIllegalAddress);
  CHECK_THAT(last(), Catch::Contains("scale_kernel") && Catch::Contains("argument 0 (float*)") &&
                         Catch::Contains("use after free"));
}

TEST_CASE("sticky errors: after a kernel fault every call fails until cudaDeviceReset",
          "[emu][strict]") {
  ResetDeviceAtExit reset;
  DeviceBuffer<float> x(64);
  std::vector<float> host(64);
  tda::emu::inject_fault("scale_kernel");
  CHECK(launch<scale_kernel>(dim3(1), dim3(64), 0, nullptr, x.get(), 64) == cudaErrorLaunchFailure);
  CHECK_THAT(last(), Catch::Contains("scale_kernel") && Catch::Contains("TDA_EMU_FAULT"));
  CHECK(cudaMemcpy(host.data(), x.get(), 256, cudaMemcpyDeviceToHost) == cudaErrorLaunchFailure);
  CHECK_THAT(last(), Catch::Contains("scale_kernel"));  // the message of the fault itself
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);  // not cleared
  CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
  float* more = nullptr;
  CHECK(cudaMalloc(&more, 4) == cudaErrorLaunchFailure);
  CHECK(launch<scale_kernel>(dim3(1), dim3(64), 0, nullptr, x.get(), 64) == cudaErrorLaunchFailure);
  CHECK(cudaFree(x.get()) == cudaErrorLaunchFailure);
  CHECK(cudaDeviceReset() == cudaSuccess);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(cudaMalloc(&more, 4) == cudaSuccess);
  CHECK(cudaFree(more) == cudaSuccess);
}

#else
TEST_CASE("strict: skipped, the CUDA toolkit headers are not on the include path", "[emu]") {
  TDA_SKIP("tests/test_emu_strict.cpp needs cuda_bf16.h (CUDA toolkit include directory)");
}
#endif
