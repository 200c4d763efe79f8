// The variants' small parameters on the device (ops.h: clamp_affine, diff_lambda and its
// backward, position_scales, axpby with a device coefficient; kernels/variant_scalars.cu): the
// emulated CUDA backend and CpuOps give the bits the variants computed on the host before these
// ops existed (the formulas below are that host code), and the CUDA side never reads its inputs
// on the host (host-access guard on). So moving a read from the host to the device changed no
// result: only where it happens.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "test_cuda_util.h"

using namespace tda;
using namespace tda::cuda_test;

TEST_CASE("cuda scalars: clamp_affine is TDA's clamp and gate and dex's annealed lambda",
          "[cuda][emu]") {
  CpuOps cpu;
  CudaOps gpu;
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    float x, a, b, lo, hi;
  };
  // TDA: lambda_c = clamp(lambda, 0, 1) and [0 <= lambda <= 1], at and beyond both bounds; dex:
  // (1 - alpha) ramp lambda_init + alpha lambda_learn, unclamped.
  const Case cases[] = {{0.5f, 1.f, 0.f, 0.f, 1.f},        {0.f, 1.f, 0.f, 0.f, 1.f},
                        {1.f, 1.f, 0.f, 0.f, 1.f},         {-0.25f, 1.f, 0.f, 0.f, 1.f},
                        {1.75f, 1.f, 0.f, 0.f, 1.f},       {0.3f, 0.4f, 0.123f, -inf, inf},
                        {-2.1f, 0.7f, 0.0371f, -inf, inf}, {std::nanf(""), 1.f, 0.f, 0.f, 1.f}};
  for (const Case& c : cases) {
    INFO("x " << c.x << " a " << c.a << " b " << c.b);
    // The host code it replaces: tda.cpp's std::min(std::max(lambda, 0), 1) and its gate,
    // dex.cpp's (1 - al) ramp init + al lambda with b = (1 - al) ramp init.
    const float v = c.b + c.a * c.x;
    const float want = c.lo == 0.f ? std::min(std::max(v, 0.f), 1.f) : v;
    const float gate = v >= c.lo && v <= c.hi ? 1.f : 0.f;
    float out[2] = {-1.f, -1.f};
    cpu.clamp_affine(out, &c.x, c.a, c.b, c.lo, c.hi);
    CHECK(same_bits({out[0], out[1]}, {want, gate}));
    HostAccessGuard guard;
    DeviceBuffer<float> gx(std::vector<float>{c.x}), gout(2);
    gpu.clamp_affine(gout.get(), gx.get(), c.a, c.b, c.lo, c.hi);
    CHECK(same_bits(gout.to_host(), {want, gate}));
  }
}

TEST_CASE("cuda scalars: the Diff lambda and its backward are the host formulas, bit for bit",
          "[cuda][emu]") {
  CpuOps cpu;
  CudaOps gpu;
  for (int d : {32, 37, 64}) {
    INFO("d " << d);
    std::vector<float> v[4];
    for (int t = 0; t < 4; ++t) v[t] = rnd(size_t(d), 50 + t, -0.3f, 0.3f);
    const float init = 0.8f - 0.6f * std::exp(-0.3f * 5.f);
    // diff.h's former host code: sequential float dots, std::exp, e1 - e2 + init.
    float d1 = 0.f, d2 = 0.f;
    for (int i = 0; i < d; ++i) {
      d1 += v[0][size_t(i)] * v[1][size_t(i)];
      d2 += v[2][size_t(i)] * v[3][size_t(i)];
    }
    const float e1 = std::exp(d1), e2 = std::exp(d2);
    const std::vector<float> lam = {e1, e2, e1 - e2 + init};
    std::vector<float> out(3);
    cpu.diff_lambda(out.data(), v[0].data(), v[1].data(), v[2].data(), v[3].data(), d, init);
    CHECK(same_bits(out, lam));
    // Backward: dlq1 += (dl e1) lk1, ... as four host axpbys with the coefficient computed on the
    // host from the downloaded dl.
    const float dl = -0.731f;
    std::vector<float> g0[4], want[4];
    const float coef[4] = {dl * e1, dl * e1, -dl * e2, -dl * e2};
    const int other[4] = {1, 0, 3, 2};
    for (int t = 0; t < 4; ++t) {
      g0[t] = rnd(size_t(d), 60 + t);
      want[t] = g0[t];
      cpu.axpby(want[t].data(), coef[t], v[other[t]].data(), 1.f, size_t(d));
    }
    std::vector<float> g[4] = {g0[0], g0[1], g0[2], g0[3]};
    cpu.diff_lambda_backward(g[0].data(), g[1].data(), g[2].data(), g[3].data(), v[0].data(),
                             v[1].data(), v[2].data(), v[3].data(), lam.data(), &dl, d);
    for (int t = 0; t < 4; ++t) CHECK(same_bits(g[t], want[t]));

    HostAccessGuard guard;
    DeviceBuffer<float> gv0(v[0]), gv1(v[1]), gv2(v[2]), gv3(v[3]), gout(3),
        gdl(std::vector<float>{dl});
    gpu.diff_lambda(gout.get(), gv0.get(), gv1.get(), gv2.get(), gv3.get(), d, init);
    CHECK(same_bits(gout.to_host(), lam));
    DeviceBuffer<float> gg0(g0[0]), gg1(g0[1]), gg2(g0[2]), gg3(g0[3]);
    gpu.diff_lambda_backward(gg0.get(), gg1.get(), gg2.get(), gg3.get(), gv0.get(), gv1.get(),
                             gv2.get(), gv3.get(), gout.get(), gdl.get(), d);
    CHECK(same_bits(gg0.to_host(), want[0]));
    CHECK(same_bits(gg1.to_host(), want[1]));
    CHECK(same_bits(gg2.to_host(), want[2]));
    CHECK(same_bits(gg3.to_host(), want[3]));
  }
}

TEST_CASE("cuda scalars: position_scales are ssmax's and lssa's former host factors",
          "[cuda][emu]") {
  CpuOps cpu;
  CudaOps gpu;
  const int H = 3, T = 131;
  const auto s = rnd(size_t(H), 70, 0.2f, 0.6f), b = rnd(size_t(H), 71);
  for (bool bias : {false, true}) {
    INFO("bias " << bias);
    // ssmax.cpp's former host loop: f_hi = s_h log(i+1) + b_h, then the log row.
    std::vector<float> want(size_t(H + 1) * T);
    for (int i = 0; i < T; ++i) {
      const float logn = std::log(float(i + 1));
      for (int h = 0; h < H; ++h)
        want[size_t(h) * T + i] = s[size_t(h)] * logn + (bias ? b[size_t(h)] : 0.f);
      want[size_t(H) * T + i] = logn;
    }
    std::vector<float> got(want.size());
    cpu.position_scales(got.data(), s.data(), bias ? b.data() : nullptr, 1.f, H, T);
    cpu.position_scales(got.data() + size_t(H) * T, nullptr, nullptr, 1.f, 1, T);
    CHECK(same_bits(got, want));
    HostAccessGuard guard;
    DeviceBuffer<float> gs(s), gb(b), gf(want.size());
    gpu.position_scales(gf.get(), gs.get(), bias ? gb.get() : nullptr, 1.f, H, T);
    gpu.position_scales(gf.get() + size_t(H) * T, nullptr, nullptr, 1.f, 1, T);
    CHECK(same_bits(gf.to_host(), want));
  }
  // lssa.cpp's former host loop: c_i = log(i+1) / log(base).
  const float log_base = std::log(64.f);
  std::vector<float> want(static_cast<size_t>(T)), got(want.size());
  for (int i = 0; i < T; ++i) want[size_t(i)] = std::log(float(i + 1)) / log_base;
  cpu.position_scales(got.data(), nullptr, nullptr, log_base, 1, T);
  CHECK(same_bits(got, want));
  DeviceBuffer<float> gc(want.size());
  gpu.position_scales(gc.get(), nullptr, nullptr, log_base, 1, T);
  CHECK(same_bits(gc.to_host(), want));
}

TEST_CASE("cuda scalars: axpby with a device coefficient is axpby with it as an argument",
          "[cuda][emu]") {
  CpuOps cpu;
  CudaOps gpu;
  const size_t n = 1001;
  const auto x = rnd(n, 80), y0 = rnd(n, 81);
  const float lam = 0.3711f;
  for (float b : {1.f, 0.f}) {
    INFO("b " << b);
    // dex's former host call: axpby(y, -lambda, x, b) with lambda downloaded.
    auto want = y0;
    cpu.axpby(want.data(), -lam, x.data(), b, n);
    auto got = y0;
    cpu.axpby(got.data(), -1.f, x.data(), b, n, &lam);
    CHECK(same_bits(got, want));
    HostAccessGuard guard;
    DeviceBuffer<float> gx(x), gy(y0), gs(std::vector<float>{lam});
    gpu.axpby(gy.get(), -1.f, gx.get(), b, n, gs.get());
    CHECK(same_bits(gy.to_host(), want));
  }
}
