// The fused MLP GELU matmuls (Ops::matmul_gelu_forward / matmul_backward_dgelu) and the residual
// matmul (Ops::matmul_residual_forward) of CudaOps,
// i.e. tda::cuda::gemm with the GELU_AUX / DGELU epilogues, against CpuOps, which runs the
// unfused defaults (matmul_* then gelu_*). Emulated: the GEMM is the CPU SGEMM and the epilogue
// the GELU kernels, so fp32 agrees to the tolerance of the gelu test in test_cuda_ops.cpp
// (rel. 1e-5 of the tensor's max: same expressions, tanhf from libm on both sides). Sizes are
// not multiples of any tile, and the aux row stride (70, 100) is not a multiple of 8, which on a
// GPU takes the unfused fallback of gemm(). The fused cuBLASLt path itself has never run (no
// GPU here); there the GELU is cuBLASLt's own, whose distance from this tanh form is not known.
#include <cblas.h>

#ifndef TDA_CUDA_EMU
#define TDA_CUDA_EMU 1  // before any CUDA header: the backend runs on the emulator here
#endif
#include <catch2/catch.hpp>

#include "backend/cuda/common.h"
#include "backend/cuda/device_stats.h"
#include "backend/device.h"
#include "model/gpt2.h"
#include "test_cuda_util.h"

using namespace tda;
using namespace tda::cuda_test;

namespace {
constexpr double kTol = 1e-5;
constexpr int N = 37, C = 100, OC = 70;

// Row-major C(M,N) = op(A) op(B), dense.
std::vector<float> sgemm(bool ta, bool tb, int M, int Nc, int K, const std::vector<float>& a,
                         int lda, const std::vector<float>& b, int ldb) {
  std::vector<float> c(size_t(M) * Nc);
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, Nc,
              K, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), Nc);
  return c;
}

// The (rows, cols) matrix stored with row stride ld, made dense.
std::vector<float> dense(const std::vector<float>& x, int rows, int cols, int ld) {
  std::vector<float> out(size_t(rows) * cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) out[size_t(r) * cols + c] = x[size_t(r) * ld + c];
  return out;
}

// Every element past the first `cols` of each row still equals `pad`.
bool padding_kept(const std::vector<float>& x, int rows, int cols, int ld, float pad) {
  for (int r = 0; r < rows; ++r)
    for (int c = cols; c < ld; ++c)
      if (x[size_t(r) * ld + c] != pad) return false;
  return true;
}

// bf16(x) widened back to fp32, through the backend's cast kernels.
std::vector<float> bf16_round(const std::vector<float>& x) {
  DeviceBuffer<float> gx(x), back(x.size());
  DeviceBuffer<__nv_bfloat16> gb(x.size());
  cuda::cast_to_bf16(gb.get(), gx.get(), x.size());
  cuda::cast_to_float(back.get(), gb.get(), x.size());
  return back.to_host();
}

struct Fwd {
  std::vector<float> y, pre;
};
Fwd cpu_forward(const std::vector<float>& x, const std::vector<float>& W) {
  CpuOps cpu;
  Fwd r{std::vector<float>(size_t(N) * OC), std::vector<float>(size_t(N) * OC)};
  cpu.matmul_gelu_forward(r.y.data(), r.pre.data(), x.data(), W.data(), N, C, OC);
  return r;
}
Fwd gpu_forward(CudaOps& gpu, const std::vector<float>& x, const float* dW) {
  DeviceBuffer<float> gx(x), gy(size_t(N) * OC), gpre(size_t(N) * OC);
  gpu.matmul_gelu_forward(gy.get(), gpre.get(), gx.get(), dW, N, C, OC);
  return {gy.to_host(), gpre.to_host()};
}

// The backward's tensors: the GELU side is this matmul's input, (N, C).
struct Bwd {
  std::vector<float> dpre, dW;
};
Bwd cpu_backward(const std::vector<float>& dy, const std::vector<float>& x,
                 const std::vector<float>& W, const std::vector<float>& pre,
                 const std::vector<float>& dW0, bool with_dW) {
  CpuOps cpu;
  Bwd r{std::vector<float>(size_t(N) * C), dW0};
  cpu.matmul_backward_dgelu(r.dpre.data(), with_dW ? r.dW.data() : nullptr, dy.data(), x.data(),
                            W.data(), pre.data(), N, C, OC);
  return r;
}
Bwd gpu_backward(CudaOps& gpu, const std::vector<float>& dy, const std::vector<float>& x,
                 const float* dW, const std::vector<float>& pre, const std::vector<float>& dW0,
                 bool with_dW) {
  DeviceBuffer<float> gdy(dy), gx(x), gpre(pre), gdpre(size_t(N) * C), gdW(dW0);
  gpu.matmul_backward_dgelu(gdpre.get(), with_dW ? gdW.get() : nullptr, gdy.get(), gx.get(), dW,
                            gpre.get(), N, C, OC);
  return {gdpre.to_host(), gdW.to_host()};
}

// Two weights in a master buffer laid out as the model's flat parameter buffer: after a small
// odd-sized tensor, each at the next GPT2::kParamAlign (256-byte) boundary.
struct Master {
  std::vector<float> flat = std::vector<float>(3);
  size_t w_at = 0, w2_at = 0;
  Master(const std::vector<float>& W, const std::vector<float>& W2) {
    w_at = append(W);
    w2_at = append(W2);
  }
  size_t append(const std::vector<float>& w) {
    const size_t at = (flat.size() + GPT2::kParamAlign - 1) / GPT2::kParamAlign * GPT2::kParamAlign;
    flat.resize(at);
    flat.insert(flat.end(), w.begin(), w.end());
    return at;
  }
};

// A CudaOps on its bf16 path over a master buffer holding W and W2 (Master).
struct Bf16Gpu {
  Master master;
  DeviceBuffer<float> flat;
  CudaOps gpu;
  const float* W;
  const float* W2;
  Bf16Gpu(const std::vector<float>& w, const std::vector<float>& w2)
      : master(w, w2),
        flat(master.flat),
        W(flat.get() + master.w_at),
        W2(flat.get() + master.w2_at) {
    gpu.enable_bf16_matmuls(flat.get(), master.flat.size());
  }
};

// For a scope, the emulated cuBLASLt refuses the residual epilogue (a GPU's fallback path).
struct RefusingLt {
  RefusingLt() { emu::lt_refuses_residual() = true; }
  ~RefusingLt() { emu::lt_refuses_residual() = false; }
  RefusingLt(const RefusingLt&) = delete;
  RefusingLt& operator=(const RefusingLt&) = delete;
};

// Backward inputs as the model has them: pre spread over GELU's curved range, x = gelu(pre).
struct BwdInputs {
  std::vector<float> pre, x, dy, dW0;
};
BwdInputs backward_inputs() {
  BwdInputs in{rnd(size_t(N) * C, 31, -4.f, 4.f), std::vector<float>(size_t(N) * C),
               rnd(size_t(N) * OC, 32), rnd(size_t(OC) * C, 33)};
  CpuOps().gelu_forward(in.x.data(), in.pre.data(), in.x.size());
  return in;
}
}  // namespace

TEST_CASE("cuda: fused GELU matmuls match the CPU backend (fp32)", "[cuda][emu]") {
  CudaOps gpu;
  const auto x = rnd(size_t(N) * C, 21), W = rnd(size_t(OC) * C, 22);
  DeviceBuffer<float> gW(W);
  const Fwd ref = cpu_forward(x, W), got = gpu_forward(gpu, x, gW.get());
  INFO("forward: y " << rel_err(got.y, ref.y) << ", pre " << rel_err(got.pre, ref.pre));
  CHECK(rel_err(got.y, ref.y) < kTol);
  CHECK(rel_err(got.pre, ref.pre) < kTol);
  // Negative control: y is not the pre-activation (the GELU was applied, and to the right one).
  CHECK(rel_err(got.y, ref.pre) > 100 * kTol);

  const BwdInputs in = backward_inputs();
  const std::vector<float> W2 = rnd(size_t(OC) * C, 34);
  DeviceBuffer<float> gW2(W2);
  for (bool with_dW : {true, false}) {
    INFO("dW " << (with_dW ? "accumulated" : "null"));
    const Bwd r = cpu_backward(in.dy, in.x, W2, in.pre, in.dW0, with_dW);
    const Bwd g = gpu_backward(gpu, in.dy, in.x, gW2.get(), in.pre, in.dW0, with_dW);
    INFO("dpre " << rel_err(g.dpre, r.dpre) << ", dW " << rel_err(g.dW, r.dW));
    CHECK(rel_err(g.dpre, r.dpre) < kTol);
    CHECK(same_bits(g.dW, r.dW));  // the same SGEMM; with dW null both keep dW0
    // Negative control: dropping gelu' (plain dx = dy W) is far outside the tolerance.
    std::vector<float> plain(size_t(N) * C);
    CpuOps().matmul_backward(plain.data(), nullptr, in.dy.data(), in.x.data(), W2.data(), N, C, OC,
                             false);
    INFO("without gelu' " << rel_err(g.dpre, plain));
    CHECK(rel_err(g.dpre, plain) > 100 * kTol);
  }
}

TEST_CASE("cuda: fused GELU matmuls on the bf16 path", "[cuda][emu]") {
  // The weights sit inside the master buffer as in the model's flat parameter buffer: after a
  // small odd-sized tensor, each at the next GPT2::kParamAlign (256-byte) boundary, so that
  // their bf16 views are 16-byte aligned, which cuBLASLt's bf16 kernels need (strict mode
  // refuses less); activations are cast per call.
  const auto x = rnd(size_t(N) * C, 41), W = rnd(size_t(OC) * C, 42);
  const BwdInputs in = backward_inputs();
  const std::vector<float> W2 = rnd(size_t(OC) * C, 43);
  Bf16Gpu b16(W, W2);
  CudaOps& gpu = b16.gpu;
  const float* gW = b16.W;
  const float* gW2 = b16.W2;

  const Fwd got = gpu_forward(gpu, x, gW);
  // Against the CPU on the bf16-rounded inputs: the emulated bf16 GEMM is the SGEMM of exactly
  // those values, so only the GELU tolerance above applies (on a GPU, tensor cores summing in
  // another order would add ~1e-6 relative).
  const Fwd rounded = cpu_forward(bf16_round(x), bf16_round(W));
  CHECK(rel_err(got.y, rounded.y) < kTol);
  CHECK(rel_err(got.pre, rounded.pre) < kTol);
  // Against the fp32 inputs: each input is rounded to 8 significant bits (relative error
  // <= 2^-9), so each product term moves by <= ~2^-8 of its size, and the sum of C = 100
  // random-sign terms by well under 1e-2 of the output's max (GELU's slope is within
  // [-0.13, 1.13], so y moves no more than pre does).
  const Fwd exact = cpu_forward(x, W);
  INFO("forward vs fp32: y " << rel_err(got.y, exact.y) << ", pre " << rel_err(got.pre, exact.pre));
  CHECK(rel_err(got.y, exact.y) < 1e-2);
  CHECK(rel_err(got.pre, exact.pre) < 1e-2);
  // Control: the bf16 path was taken (the error is far above the fp32 tolerance).
  CHECK(rel_err(got.pre, exact.pre) > 10 * kTol);

  const auto dy_r = bf16_round(in.dy), x_r = bf16_round(in.x), W2_r = bf16_round(W2);
  for (bool with_dW : {true, false}) {
    INFO("dW " << (with_dW ? "accumulated" : "null"));
    const Bwd g = gpu_backward(gpu, in.dy, in.x, gW2, in.pre, in.dW0, with_dW);
    const Bwd r = cpu_backward(dy_r, x_r, W2_r, in.pre, in.dW0, with_dW);
    CHECK(rel_err(g.dpre, r.dpre) < kTol);
    CHECK(rel_err(g.dW, r.dW) < kTol);
    // gelu'(pre) is bounded (|gelu'| < 1.13) and pre is fp32 on both sides, so the rounded
    // inputs move dpre by no more than they move dy W: the forward's bound applies.
    const Bwd e = cpu_backward(in.dy, in.x, W2, in.pre, in.dW0, with_dW);
    INFO("backward vs fp32: dpre " << rel_err(g.dpre, e.dpre) << ", dW " << rel_err(g.dW, e.dW));
    CHECK(rel_err(g.dpre, e.dpre) < 1e-2);
    CHECK(rel_err(g.dW, e.dW) < 1e-2);
    std::vector<float> plain(size_t(N) * C);
    CpuOps().matmul_backward(plain.data(), nullptr, dy_r.data(), x_r.data(), W2_r.data(), N, C, OC,
                             false);
    CHECK(rel_err(g.dpre, plain) > 100 * kTol);  // negative control: gelu' dropped
  }
}

// The residual matmul, y = r + x W^T (the attention's and the MLP's output projections): the
// emulated cuBLASLt call adds r to its fp32 product, so it is CpuOps's composition (matmul_forward
// then add_inplace) bit for bit, on both paths, and launches no kernel of its own.
TEST_CASE("cuda: the residual matmul equals the CPU's matmul then add, with no add kernel",
          "[cuda][emu]") {
  const auto x = rnd(size_t(N) * C, 81), W = rnd(size_t(OC) * C, 82),
             r = rnd(size_t(N) * OC, 83, -3.f, 3.f);
  EmulatedDevice& emu = *cuda::emulated_device();
  auto cpu_residual = [&](const std::vector<float>& xs, const std::vector<float>& Ws) {
    std::vector<float> y(size_t(N) * OC);
    CpuOps().matmul_residual_forward(y.data(), xs.data(), Ws.data(), N, C, OC, r.data());
    return y;
  };
  const std::vector<float> ref = cpu_residual(x, W);
  {
    std::vector<float> plain(size_t(N) * OC), sum = plain;
    CpuOps().matmul_forward(plain.data(), x.data(), W.data(), N, C, OC);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] = plain[i] + r[i];
    CHECK(same_bits(ref, sum));        // the reference is the product plus r, one fp32 add
    CHECK(rel_err(ref, plain) > 0.1);  // control: r is not negligible
  }

  CudaOps gpu;
  DeviceBuffer<float> gx(x), gW(W), gr(r), gy(size_t(N) * OC);
  const DeviceStats before = emu.stats();
  gpu.matmul_residual_forward(gy.get(), gx.get(), gW.get(), N, C, OC, gr.get());
  const DeviceStats d = emu.stats().since(before);
  CHECK(same_bits(gy.to_host(), ref));
  CHECK(same_bits(gr.to_host(), r));  // r read only
  CHECK(d.gemms == 1);
  CHECK(d.launches == 0);  // the add is the GEMM's: no add_inplace pass over y

  // bf16 path: x stored in bf16, W from the master copy; the product of the rounded inputs plus
  // r, and the plain bf16 matmul (r null) followed by the add kernel gives the same bits.
  const auto W2 = rnd(size_t(OC) * C, 84);
  Bf16Gpu b16(W, W2);
  auto bits = [](DeviceBuffer<__nv_bfloat16>& b) { return reinterpret_cast<uint16_t*>(b.get()); };
  DeviceBuffer<__nv_bfloat16> gx16(x.size());
  cuda::cast_to_bf16(gx16.get(), gx.get(), x.size());
  DeviceBuffer<float> gy16(size_t(N) * OC), gplain(size_t(N) * OC);
  const DeviceStats before16 = emu.stats();
  b16.gpu.matmul_forward_bf16(gy16.get(), bits(gx16), b16.W, N, C, OC, gr.get());
  CHECK(emu.stats().since(before16).launches == 0);
  const auto got16 = gy16.to_host();
  CHECK(same_bits(got16, cpu_residual(bf16_round(x), bf16_round(W))));
  b16.gpu.matmul_forward_bf16(gplain.get(), bits(gx16), b16.W, N, C, OC, nullptr);
  b16.gpu.add_inplace(gplain.get(), gr.get(), r.size());
  CHECK(same_bits(got16, gplain.to_host()));
  CHECK(rel_err(got16, ref) < 1e-2);       // the bf16 bound of the GELU test above
  CHECK(rel_err(got16, ref) > 10 * kTol);  // control: the bf16 path was taken

  // The same in the model's order on the fp32 backend in bf16 mode (matmul_residual_forward
  // casts x as matmul_forward does).
  DeviceBuffer<float> gy3(size_t(N) * OC);
  b16.gpu.matmul_residual_forward(gy3.get(), gx.get(), b16.W, N, C, OC, gr.get());
  CHECK(same_bits(gy3.to_host(), got16));

  // A cuBLASLt that refuses the out-of-place addend: the product, then one add_inplace launch,
  // the same bits.
  DeviceBuffer<float> gy4(size_t(N) * OC);
  DeviceStats d4;
  {
    RefusingLt refusing;
    const DeviceStats before4 = emu.stats();
    gpu.matmul_residual_forward(gy4.get(), gx.get(), gW.get(), N, C, OC, gr.get());
    d4 = emu.stats().since(before4);
  }
  CHECK(same_bits(gy4.to_host(), ref));
  CHECK(d4.launches == 1);
  CHECK(d4.gemm_epilogues == 1);
}

// bf16 storage of the GEMM-input activations (Bf16Matmuls::*_bf16, dtype bf16 in the model). The
// emulated GEMM is the SGEMM of the exactly widened bf16 inputs, so each stored value is checked
// bit for bit against the rounding of an fp32 reference, and the whole against fp32 at the bf16
// bound of the test above.
TEST_CASE(
    "cuda: the bf16 storage path: rmsnorm and attention outputs, MLP pre-activation and "
    "GELU in bf16",
    "[cuda][emu]") {
  const size_t nx = size_t(N) * C;  // x (N, C) is made below, as the model makes it
  const auto W = rnd(size_t(OC) * C, 62), W2 = rnd(size_t(OC) * C, 63);
  Bf16Gpu b16(W, W2);
  CudaOps& gpu = b16.gpu;
  const float* gW = b16.W;
  const float* gW2 = b16.W2;
  auto widen = [](const DeviceBuffer<__nv_bfloat16>& b, size_t n) {
    DeviceBuffer<float> f(n);
    cuda::cast_to_float(f.get(), b.get(), n);
    return f.to_host();
  };
  auto bits = [](DeviceBuffer<__nv_bfloat16>& b) { return reinterpret_cast<uint16_t*>(b.get()); };

  // The input as the model makes it: x = bf16(rmsnorm(u)), rstd fp32 as the fp32 kernel's.
  const auto u = rnd(size_t(N) * C, 60, -3.f, 3.f), nw = rnd(size_t(C), 66, 0.5f, 1.5f);
  const size_t rows = N;
  DeviceBuffer<float> gu(u), gnw(nw), grstd(rows), gx32(nx), grstd32(rows);
  DeviceBuffer<__nv_bfloat16> gx16(nx);
  gpu.rmsnorm_forward_bf16(bits(gx16), grstd.get(), gu.get(), gnw.get(), N, C, 1e-5f);
  cuda::rmsnorm_forward(gx32.get(), grstd32.get(), gu.get(), gnw.get(), N, C, 1e-5f);
  const auto x_r = widen(gx16, nx);
  CHECK(same_bits(x_r, bf16_round(gx32.to_host())));
  CHECK(same_bits(grstd.to_host(), grstd32.to_host()));
  CHECK(rel_err(x_r, gx32.to_host()) > 10 * kTol);  // control: it was rounded

  // The attention output (c_proj's input), written in fp32 by every kind and stored by
  // store_bf16: the bits the fp32-input GEMM's own cast makes, so c_proj's product is unchanged.
  {
    const auto o = rnd(nx, 69, -2.f, 2.f);
    DeviceBuffer<float> go(o), gy32(size_t(N) * OC), gy16(size_t(N) * OC);
    DeviceBuffer<__nv_bfloat16> go16(nx);
    gpu.store_bf16(bits(go16), go.get(), nx);
    CHECK(same_bits(widen(go16, nx), bf16_round(o)));
    CHECK(rel_err(widen(go16, nx), o) > 10 * kTol);  // control: it was rounded
    gpu.matmul_forward(gy32.get(), go.get(), gW, N, C, OC);
    gpu.matmul_forward_bf16(gy16.get(), bits(go16), gW, N, C, OC, nullptr);
    CHECK(same_bits(gy16.to_host(), gy32.to_host()));
  }

  // Forward: pre = bf16(x W^T) and y = bf16(gelu(pre)), (N, OC) bf16 each.
  DeviceBuffer<__nv_bfloat16> gy(size_t(N) * OC), gpre(size_t(N) * OC);
  gpu.matmul_gelu_forward_bf16(bits(gy), bits(gpre), bits(gx16), gW, N, C, OC);
  const auto pre = widen(gpre, size_t(N) * OC), y = widen(gy, size_t(N) * OC);
  const auto W_r = bf16_round(W);
  CHECK(same_bits(pre, bf16_round(sgemm(false, true, N, OC, C, x_r, C, W_r, C))));
  DeviceBuffer<float> gpre32(pre), gy32(pre.size());
  cuda::gelu_forward(gy32.get(), gpre32.get(), pre.size());  // the fp32 kernel on the stored pre
  CHECK(same_bits(y, bf16_round(gy32.to_host())));
  const Fwd exact = cpu_forward(gx32.to_host(), W);
  INFO("forward vs fp32: y " << rel_err(y, exact.y) << ", pre " << rel_err(pre, exact.pre));
  CHECK(rel_err(pre, exact.pre) < 1e-2);  // the rounded inputs plus one rounding of pre
  CHECK(rel_err(y, exact.y) < 1e-2);
  CHECK(rel_err(y, exact.pre) > 100 * kTol);  // negative control: the GELU was applied

  // The next GEMM (the model's mlp_proj) reads y in bf16 as it is: z(N, C) = y(N, OC) V^T, V
  // being W2's floats read as a (C, OC) matrix.
  DeviceBuffer<float> gz(size_t(N) * C);
  gpu.matmul_forward_bf16(gz.get(), bits(gy), gW2, N, OC, C, nullptr);
  CHECK(same_bits(gz.to_host(), sgemm(false, true, N, C, OC, y, OC, bf16_round(W2), OC)));

  // Backward: dpre(N, OC) = bf16((dz V) * gelu'(pre)), dV += dz^T y, with y and pre as stored;
  // dpre in bf16 is the dy of c_fc's backward GEMMs, the product dz V fp32 scratch.
  const auto dz = rnd(size_t(N) * C, 64), dW0 = rnd(size_t(OC) * C, 65);
  const auto dz_r = bf16_round(dz), W2_r = bf16_round(W2);
  for (bool with_dW : {true, false}) {
    INFO("dW " << (with_dW ? "accumulated" : "null"));
    // dz in bf16, as the model's residual norm backward stores it
    DeviceBuffer<float> gdz(dz), gprod(size_t(N) * OC), gdW(dW0);
    DeviceBuffer<__nv_bfloat16> gdz16(dz.size()), gdpre16(size_t(N) * OC);
    gpu.store_bf16(bits(gdz16), gdz.get(), dz.size());
    gpu.matmul_backward_dgelu_bf16(bits(gdpre16), gprod.get(), with_dW ? gdW.get() : nullptr,
                                   bits(gdz16), bits(gy), gW2, bits(gpre), N, OC, C);
    // The CPU's unfused composition on the same rounded values (its GELU uses a faster tanh:
    // kTol as in the fp32 test above), then dpre's one rounding (2^-8 of each element at most).
    CpuOps cpu;
    std::vector<float> dpre(size_t(N) * OC), dW = dW0;
    cpu.matmul_backward_dgelu(dpre.data(), with_dW ? dW.data() : nullptr, dz_r.data(), y.data(),
                              W2_r.data(), pre.data(), N, OC, C);
    const auto got = widen(gdpre16, size_t(N) * OC);
    INFO("dpre " << rel_err(got, dpre) << ", dW " << rel_err(gdW.to_host(), dW));
    CHECK(rel_err(got, dpre) < 0x1p-8 + kTol);
    CHECK(rel_err(gdW.to_host(), dW) < kTol);
    if (!with_dW) CHECK(same_bits(gdW.to_host(), dW0));
    std::vector<float> plain(size_t(N) * OC);  // dz V alone, gelu' dropped
    cpu.matmul_backward(plain.data(), nullptr, dz_r.data(), y.data(), W2_r.data(), N, OC, C, false);
    CHECK(rel_err(gprod.to_host(), plain) < kTol);
    // The bits the fp32 path's cast of dpre at c_fc's GEMM input made: the fp32 GELU backward on
    // the same product and stored pre, rounded.
    DeviceBuffer<float> gdpre32(size_t(N) * OC);
    cuda::gelu_backward(gdpre32.get(), gpre32.get(), gprod.get(), size_t(N) * OC);
    CHECK(same_bits(got, bf16_round(gdpre32.to_host())));
    // Against fp32 throughout (x, pre and y unrounded): dz and V rounded as in the fused test
    // above, plus pre's rounding through gelu' (|v gelu''(v)| < 0.35: under 1e-3). Observed
    // 1.07e-2 of dpre's max (the 100-term sums of the rounded dz and V), dW 3.5e-3: 2e-2.
    std::vector<float> e(size_t(N) * OC), eW = dW0;
    cpu.matmul_backward_dgelu(e.data(), with_dW ? eW.data() : nullptr, dz.data(), exact.y.data(),
                              W2.data(), exact.pre.data(), N, OC, C);
    INFO("vs fp32: dpre " << rel_err(got, e) << ", dW " << rel_err(gdW.to_host(), eW));
    CHECK(rel_err(got, e) < 2e-2);
    CHECK(rel_err(gdW.to_host(), eW) < 2e-2);
    CHECK(rel_err(got, plain) > 100 * kTol);  // negative control: gelu' was applied
  }

  // The c_fc / c_attn backward on the stored x: dx = dpre W (overwritten, or accumulated),
  // dW += dpre^T x, against the CPU on the same rounded values.
  const auto dp = rnd(size_t(N) * OC, 67), dx0 = rnd(nx, 68);
  const auto dp_r = bf16_round(dp);
  for (bool acc : {false, true}) {
    INFO("accumulate_dx " << acc);
    DeviceBuffer<float> gdp(dp), gdx(dx0), gdW(dW0);
    gpu.matmul_backward_bf16(gdx.get(), gdW.get(), gdp.get(), bits(gx16), gW, N, C, OC, acc);
    std::vector<float> dx = dx0, dW = dW0;
    CpuOps().matmul_backward(dx.data(), dW.data(), dp_r.data(), x_r.data(), W_r.data(), N, C, OC,
                             acc);
    CHECK(same_bits(gdx.to_host(), dx));
    CHECK(same_bits(gdW.to_host(), dW));
  }
  // The same with dy stored in bf16 too (the c_proj backward on the residual gradient): the
  // bits of casting dy at the GEMM.
  {
    DeviceBuffer<float> gdp(dp), gdx(dx0), gdW(dW0), gdx2(dx0), gdW2(dW0);
    DeviceBuffer<__nv_bfloat16> gdp16(dp.size());
    gpu.store_bf16(bits(gdp16), gdp.get(), dp.size());
    gpu.matmul_backward_bf16_dy(gdx.get(), gdW.get(), bits(gdp16), bits(gx16), gW, N, C, OC);
    gpu.matmul_backward_bf16(gdx2.get(), gdW2.get(), gdp.get(), bits(gx16), gW, N, C, OC, false);
    CHECK(same_bits(gdx.to_host(), gdx2.to_host()));
    CHECK(same_bits(gdW.to_host(), gdW2.to_host()));
    CHECK_FALSE(same_bits(gdW.to_host(), dW0));  // control: dW was accumulated into
  }
}

// The residual gradient in the bf16 path: rmsnorm_backward_bf16 is rmsnorm_backward (dx += ...,
// dw += ...) bit for bit, and its bf16 copy is the rounding of the accumulated dx.
TEST_CASE("cuda: rmsnorm_backward_bf16 equals rmsnorm_backward and rounds its sum", "[cuda][emu]") {
  const auto W = rnd(size_t(OC) * C, 62), W2 = rnd(size_t(OC) * C, 63);
  Bf16Gpu b16(W, W2);
  CudaOps& gpu = b16.gpu;
  const size_t nx = size_t(N) * C;
  const auto x = rnd(nx, 70, -3.f, 3.f), dy = rnd(nx, 71), w = rnd(size_t(C), 72, 0.5f, 1.5f),
             dx0 = rnd(nx, 73), dw0 = rnd(size_t(C), 74), rstd = rnd(size_t(N), 75, 0.5f, 2.f);
  DeviceBuffer<float> gx(x), gdy(dy), gw(w), grstd(rstd);
  DeviceBuffer<float> gdx(dx0), gdw(dw0), gdx2(dx0), gdw2(dw0);
  DeviceBuffer<__nv_bfloat16> gdx16(nx);
  gpu.rmsnorm_backward_bf16(gdx.get(), reinterpret_cast<uint16_t*>(gdx16.get()), gdw.get(),
                            gdy.get(), gx.get(), gw.get(), grstd.get(), N, C);
  gpu.rmsnorm_backward(gdx2.get(), gdw2.get(), gdy.get(), gx.get(), gw.get(), grstd.get(), N, C);
  const auto dx = gdx.to_host();
  CHECK(same_bits(dx, gdx2.to_host()));
  CHECK(same_bits(gdw.to_host(), gdw2.to_host()));
  CHECK_FALSE(same_bits(dx, dx0));  // control: dx was accumulated into
  DeviceBuffer<float> wide(nx);
  cuda::cast_to_float(wide.get(), gdx16.get(), nx);
  CHECK(same_bits(wide.to_host(), bf16_round(dx)));
}

TEST_CASE("cuda: gemm epilogues on strided and transposed operands", "[cuda][emu]") {
  // The entry point itself, as cuBLASLt takes it: row strides wider than the rows (the fallback
  // kernels then run row by row), both transposition flags; padding must stay untouched.
  const int M = 37, Nc = 70, K = 100, ldc = Nc + 3, ldx = Nc + 5;
  const float pad = 12345.0f;
  CpuOps cpu;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      INFO("trans_a " << ta << " trans_b " << tb);
      const auto a = rnd(size_t(M) * K, 51), b = rnd(size_t(K) * Nc, 52, -2.f, 2.f);
      const int lda = ta ? M : K, ldb = tb ? K : Nc;
      const auto prod = sgemm(ta, tb, M, Nc, K, a, lda, b, ldb);  // dense reference product
      DeviceBuffer<float> ga(a), gb(b);
      // kGeluAux: C = gelu(P), aux = P
      std::vector<float> c0(size_t(M) * ldc, pad), x0(size_t(M) * ldx, pad);
      DeviceBuffer<float> gc(c0), gx(x0);
      cuda::gemm(ta, tb, M, Nc, K, 1.0f, ga.get(), lda, gb.get(), ldb, 0.0f, gc.get(), ldc,
                 cuda::Epilogue::kGeluAux, gx.get(), ldx);
      std::vector<float> y(prod.size());
      cpu.gelu_forward(y.data(), prod.data(), prod.size());
      const auto c = gc.to_host(), aux = gx.to_host();
      CHECK(rel_err(dense(c, M, Nc, ldc), y) < kTol);
      CHECK(rel_err(dense(aux, M, Nc, ldx), prod) < kTol);
      CHECK(padding_kept(c, M, Nc, ldc, pad));
      CHECK(padding_kept(aux, M, Nc, ldx, pad));
      // kDgelu: C = P * gelu'(aux), aux read only
      const auto pre = rnd(size_t(M) * ldx, 53, -4.f, 4.f);
      DeviceBuffer<float> gpre(pre), gd(c0);
      cuda::gemm(ta, tb, M, Nc, K, 1.0f, ga.get(), lda, gb.get(), ldb, 0.0f, gd.get(), ldc,
                 cuda::Epilogue::kDgelu, gpre.get(), ldx);
      std::vector<float> d(prod.size());
      const auto pre_d = dense(pre, M, Nc, ldx);
      cpu.gelu_backward(d.data(), pre_d.data(), prod.data(), prod.size());
      const auto got = gd.to_host();
      CHECK(rel_err(dense(got, M, Nc, ldc), d) < kTol);
      CHECK(rel_err(dense(got, M, Nc, ldc), prod) > 100 * kTol);  // negative control
      CHECK(padding_kept(got, M, Nc, ldc, pad));
      CHECK(same_bits(gpre.to_host(), pre));
      // kResidual: C = P + aux, aux read only, at its own row stride
      DeviceBuffer<float> gres(c0);
      cuda::gemm(ta, tb, M, Nc, K, 1.0f, ga.get(), lda, gb.get(), ldb, 0.0f, gres.get(), ldc,
                 cuda::Epilogue::kResidual, gpre.get(), ldx);
      std::vector<float> sum(prod.size());
      for (size_t i = 0; i < sum.size(); ++i) sum[i] = prod[i] + pre_d[i];
      const auto res = gres.to_host();
      CHECK(same_bits(dense(res, M, Nc, ldc), sum));
      CHECK(padding_kept(res, M, Nc, ldc, pad));
      CHECK(same_bits(gpre.to_host(), pre));
      {  // refused by cuBLASLt: the product, then the add kernel row by row (strided)
        RefusingLt refusing;
        DeviceBuffer<float> gref(c0);
        cuda::gemm(ta, tb, M, Nc, K, 1.0f, ga.get(), lda, gb.get(), ldb, 0.0f, gref.get(), ldc,
                   cuda::Epilogue::kResidual, gpre.get(), ldx);
        CHECK(same_bits(gref.to_host(), res));
      }
    }
}

TEST_CASE("cuda: gemm refuses epilogue calls it leaves undefined or that would race",
          "[cuda][emu]") {
  const int M = 5, Nc = 8, K = 4;
  DeviceBuffer<float> a(size_t(M) * K), b(size_t(K) * Nc), c(size_t(M) * Nc * 2);
  DeviceBuffer<float> aux(size_t(M) * Nc);
  auto call = [&](float beta, float* aux_p, int ld_aux) {
    cuda::gemm(false, false, M, Nc, K, 1.0f, a.get(), K, b.get(), Nc, beta, c.get(), Nc,
               cuda::Epilogue::kGeluAux, aux_p, ld_aux);
  };
  CHECK_THROWS_WITH(call(1.0f, aux.get(), Nc), Catch::Contains("beta == 0"));
  CHECK_THROWS_WITH(call(0.0f, nullptr, Nc), Catch::Contains("needs aux"));
  CHECK_THROWS_WITH(call(0.0f, aux.get(), Nc - 1), Catch::Contains("needs aux"));
  CHECK_THROWS_WITH(call(0.0f, c.get() + 3, Nc), Catch::Contains("overlaps C"));
  CHECK_NOTHROW(call(0.0f, c.get() + size_t(M) * Nc, Nc));  // adjacent, not overlapping
  // The residual epilogue: r is the only addend (beta 0) and must not overlap the output.
  auto residual = [&](float beta, float* r) {
    cuda::gemm(false, false, M, Nc, K, 1.0f, a.get(), K, b.get(), Nc, beta, c.get(), Nc,
               cuda::Epilogue::kResidual, r, Nc);
  };
  CHECK_THROWS_WITH(residual(1.0f, aux.get()),
                    Catch::Contains("a residual epilogue needs beta == 0"));
  CHECK_THROWS_WITH(residual(0.0f, nullptr), Catch::Contains("needs aux"));
  CHECK_THROWS_WITH(residual(0.0f, c.get() + 3), Catch::Contains("overlaps C"));
  CHECK_NOTHROW(residual(0.0f, aux.get()));
}
