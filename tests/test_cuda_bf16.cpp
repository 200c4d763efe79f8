// bf16 building blocks of the CUDA backend (kernels/cast.cu, the bf16 tda::cuda::gemm), emulated.
#include <cblas.h>

#ifndef TDA_CUDA_EMU
#define TDA_CUDA_EMU 1  // before any CUDA header: the backend runs on the emulator here
#endif
#include <catch2/catch.hpp>

#include "backend/cuda/common.h"
#include "test_cuda_util.h"

using namespace tda;
using namespace tda::cuda_test;

TEST_CASE("cuda: bf16 casts round to nearest even and widen exactly", "[cuda][emu]") {
  const size_t n = 1037;
  auto x = rnd(n, 91, -100.f, 100.f);
  x[0] = 1.0f + 1.0f / 256.0f;  // halfway between two bf16 values: ties to even (1.0)
  x[1] = 1.0f + 3.0f / 256.0f;  // halfway: ties to even (1 + 4/256)
  DeviceBuffer<float> gx(x), back(n);
  DeviceBuffer<__nv_bfloat16> gb(n);
  cuda::cast_to_bf16(gb.get(), gx.get(), n);
  cuda::cast_to_float(back.get(), gb.get(), n);
  const auto r = back.to_host();
  CHECK(r[0] == 1.0f);
  CHECK(r[1] == 1.0f + 4.0f / 256.0f);
  for (size_t i = 0; i < n; ++i) {
    // 8 significant bits: half an ulp is at most 2^-8 relative
    CHECK(std::fabs(r[i] - x[i]) <= std::ldexp(std::fabs(x[i]), -8));
  }
  // bf16 -> float -> bf16 is the identity
  DeviceBuffer<__nv_bfloat16> gb2(n);
  cuda::cast_to_bf16(gb2.get(), back.get(), n);
  const auto b1 = gb.to_host(), b2 = gb2.to_host();
  CHECK(std::memcmp(b1.data(), b2.data(), n * sizeof(__nv_bfloat16)) == 0);
}

TEST_CASE("cuda: the bf16 gemm is the fp32 GEMM of the rounded inputs", "[cuda][emu]") {
  const int M = 37, N = 70, K = 100;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      INFO("trans_a " << ta << " trans_b " << tb);
      auto a = rnd(size_t(M) * K, 92), b = rnd(size_t(K) * N, 93), c0 = rnd(size_t(M) * N, 94);
      DeviceBuffer<float> ga(a), gb(b), gc(c0), ar(a.size()), br(b.size());
      DeviceBuffer<__nv_bfloat16> ha(a.size()), hb(b.size());
      cuda::cast_to_bf16(ha.get(), ga.get(), a.size());
      cuda::cast_to_bf16(hb.get(), gb.get(), b.size());
      cuda::cast_to_float(ar.get(), ha.get(), a.size());
      cuda::cast_to_float(br.get(), hb.get(), b.size());
      const int lda = ta ? M : K, ldb = tb ? K : N;
      cuda::gemm(ta, tb, M, N, K, 0.5f, ha.get(), lda, hb.get(), ldb, 1.0f, gc.get(), N);
      auto ra = ar.to_host(), rb = br.to_host(), ref = c0;
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M,
                  N, K, 0.5f, ra.data(), lda, rb.data(), ldb, 1.0f, ref.data(), N);
      // Emulated: the same SGEMM on the same (exactly widened) values. A GPU's tensor cores sum
      // in another order: there the comparison needs ~1e-6 relative, not bit equality.
      CHECK(same_bits(gc.to_host(), ref));
      // Against the unrounded fp32 product: bf16 inputs carry up to 2^-8 relative error each.
      auto exact = c0;
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M,
                  N, K, 0.5f, a.data(), lda, b.data(), ldb, 1.0f, exact.data(), N);
      CHECK(rel_err(gc.to_host(), exact) < 1e-2);
    }
}

// The LM head in the bf16 path: x and W enter the logits GEMM as bf16, the softmax kernel writes
// bf16 dlogits for the dx and dW GEMMs; logits, the loss and dx/dW are fp32. Against the CPU
// on the bf16-rounded x and W, the loss differs only by summation order (1e-5), while dx and dW
// also carry the rounding of dlogits to 8 significant bits (2^-9 relative per term): 1e-2.
// Observed: loss 1.1e-7, dx 2.0e-3, dW 3.6e-5.
TEST_CASE("cuda: the bf16 LM head matches the CPU on rounded inputs", "[cuda][emu]") {
  CpuOps cpu;
  CudaOps gpu;
  const int N = 1100, C = 40, Vp = 128, Vr = 100;  // two row chunks
  auto x = rnd(size_t(N) * C, 71, -3.f, 3.f), W = rnd(size_t(Vp) * C, 72);
  auto dW0 = rnd(size_t(Vp) * C, 73);
  auto tg = tokens(size_t(N), Vr, 74);
  auto round = [](std::vector<float> v) {
    for (auto& e : v) e = __bfloat162float(__float2bfloat16(e));
    return v;
  };
  const auto xr = round(x), Wr = round(W);
  std::vector<float> loss(static_cast<size_t>(N)), dx(size_t(N) * C), dW = dW0;
  cpu.lm_head_loss(loss.data(), dx.data(), dW.data(), xr.data(), Wr.data(), tg.data(), N, C, Vp, Vr,
                   1.0f / N);
  // W lives in the "weights" buffer whose bf16 copy the backend keeps, as in GPT2.
  DeviceBuffer<float> gW(W), gx(x), gl(static_cast<size_t>(N)), gdx(size_t(N) * C), gdW(dW0);
  DeviceBuffer<int32_t> gt(tg);
  gpu.enable_bf16_matmuls(gW.get(), W.size());
  gpu.lm_head_loss(gl.get(), gdx.get(), gdW.get(), gx.get(), gW.get(), gt.get(), N, C, Vp, Vr,
                   1.0f / N);
  CHECK(rel_err(gl.to_host(), loss) < 1e-5);
  CHECK(rel_err(gdx.to_host(), dx) < 1e-2);
  CHECK(rel_err(gdW.to_host(), dW) < 1e-2);
  // The bf16 path is taken: the fp32 loss of the unrounded inputs is measurably different.
  std::vector<float> loss32(static_cast<size_t>(N)), dx32(size_t(N) * C), dW32 = dW0;
  cpu.lm_head_loss(loss32.data(), dx32.data(), dW32.data(), x.data(), W.data(), tg.data(), N, C, Vp,
                   Vr, 1.0f / N);
  CHECK(rel_err(gl.to_host(), loss32) > 1e-4);
}
