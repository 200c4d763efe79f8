// The attention variants' pre/post ops (kernels/variant_ops.cu, axpby in elementwise.cu) on the
// emulated CUDA backend against CpuOps, at sizes that are not multiples of a warp or a block
// (D = 37 and 64, N = 45 rows, C = 100 channels, 70 tokens over 3 chunks of 32). Both sides are
// fp32; where the CUDA side sums in another order (warp butterflies, chunk partials) the error is
// a few ulps of the tensor's scale: rel_err <= 1e-5. head_row_sum accumulates in double on both
// sides: 1e-6. Reductions must also give the same bits under every emulator schedule.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>

#include "attention/common.h"
#include "test_cuda_util.h"

using namespace tda;
using namespace tda::cuda_test;

namespace {
constexpr double kTol = 1e-5;
}

TEST_CASE("cuda prepost: l2norm and row_dot match the CPU backend", "[cuda][emu]") {
  CpuOps cpu;
  CudaOps gpu;
  for (int D : {37, 64}) {
    const size_t N = 45;
    auto x = rnd(N * D, 1), g = rnd(N * D, 2);
    for (int d = 0; d < D; ++d) x[size_t(7) * D + d] = 0.f;  // |x| = 0: the clamped branch
    std::vector<float> nrm(N), dot(N);
    auto xh = x, dx = g;
    cpu.l2norm_forward(xh.data(), nrm.data(), N, D);
    cpu.l2norm_backward(dx.data(), xh.data(), nrm.data(), N, D);
    cpu.row_dot(dot.data(), xh.data(), g.data(), N, D);
    DeviceBuffer<float> gx(x), gn(N), gg(g), gd(N);
    gpu.l2norm_forward(gx.get(), gn.get(), N, D);
    CHECK(rel_err(gx.to_host(), xh) < kTol);
    CHECK(rel_err(gn.to_host(), nrm) < kTol);
    gpu.l2norm_backward(gg.get(), gx.get(), gn.get(), N, D);
    CHECK(rel_err(gg.to_host(), dx) < kTol);
    DeviceBuffer<float> g2(g);
    gpu.row_dot(gd.get(), gx.get(), g2.get(), N, D);
    CHECK(rel_err(gd.to_host(), dot) < kTol);
  }
}

TEST_CASE("cuda prepost: head_row_sum is the CPU's fixed-order sum, schedule-independent",
          "[cuda][emu]") {
  CpuOps cpu;
  CudaOps gpu;
  const int B = 3, H = 5, T = 131;  // 1965 rows, not a multiple of the 256-thread block
  auto x = rnd(size_t(B) * H * T, 3), w = rnd(size_t(T), 4), d0 = rnd(size_t(H), 5);
  for (bool weighted : {false, true}) {
    auto ref = d0;
    cpu.head_row_sum(ref.data(), x.data(), weighted ? w.data() : nullptr, -0.7f, B, H, T);
    std::vector<float> first;
    for (uint64_t seed : {0, 5}) {
      ScheduleSeed s(seed);
      DeviceBuffer<float> gx(x), gw(w), gd(d0);
      gpu.head_row_sum(gd.get(), gx.get(), weighted ? gw.get() : nullptr, -0.7f, B, H, T);
      CHECK(rel_err(gd.to_host(), ref) < 1e-6);
      if (first.empty())
        first = gd.to_host();
      else
        CHECK(same_bits(gd.to_host(), first));
    }
  }
}

TEST_CASE("cuda prepost: axpby matches the CPU backend", "[cuda][emu]") {
  CpuOps cpu;
  CudaOps gpu;
  const int B = 2, H = 3, T = 17, D = 37;
  const size_t n = size_t(B) * H * T * D;
  auto x = rnd(n, 6);
  auto y0 = rnd(n, 8);
  for (float b : {1.f, 0.4f, 0.f}) {
    auto y = y0;
    cpu.axpby(y.data(), -1.3f, x.data(), b, n);
    DeviceBuffer<float> gx(x), gy(y0), fresh(n);
    gpu.axpby(gy.get(), -1.3f, gx.get(), b, n);
    CHECK(same_bits(gy.to_host(), y));
    if (b == 0.f) {  // y is written without being read: fresh allocations hold NaN bytes here
      gpu.axpby(fresh.get(), -1.3f, gx.get(), 0.f, n);
      CHECK(same_bits(fresh.to_host(), y));
    }
  }
}

// The gate merges the heads (forward) and splits its gradient back into them (backward) as it
// goes: checked against merge_heads / split_heads and the formulas, then CUDA against the CPU.
TEST_CASE("cuda prepost: sigmoid gate forward and backward match the CPU backend", "[cuda][emu]") {
  CpuOps cpu;
  CudaOps gpu;
  const int B = 3, T = 15, N = B * T, H = 3, D = 37, C = H * D;
  const size_t n = size_t(N) * C;
  for (int group : {1, D}) {  // elementwise and headwise gates
    INFO("group " << group);
    const int gates = C / group, zs = gates + 5, dzs = gates + 3;  // strided, as inside proj
    auto o = rnd(n, 9), z = rnd(size_t(N) * zs, 10, -3.f, 3.f);
    auto dy = rnd(n, 11), dz0 = rnd(size_t(N) * dzs, 12);
    auto gam = [&](size_t row, int c) {
      return 1.0 / (1.0 + std::exp(-double(z[row * zs + c / group])));
    };
    std::vector<float> y(n), om(n), g(n), dym(n);
    cpu.sigmoid_gate_forward(y.data(), o.data(), z.data(), zs, B, T, H, D, group);
    cpu.merge_heads(om.data(), o.data(), C, 0, B, T, H, D);  // om: o in rows, as y
    auto dz = dz0;
    cpu.sigmoid_gate_backward(g.data(), dz.data(), dzs, dy.data(), o.data(), z.data(), zs, B, T, H,
                              D, group);
    cpu.merge_heads(dym.data(), g.data(), C, 0, B, T, H, D);  // g back in rows: dy gam
    double err_y = 0, err_g = 0, err_dz = 0;
    for (size_t row = 0; row < size_t(N); ++row) {
      std::vector<double> want_dz(size_t(gates), 0.0);
      for (int c = 0; c < C; ++c) {
        const size_t i = row * C + c;
        const double s = gam(row, c);
        err_y = std::max(err_y, std::fabs(y[i] - om[i] * s));
        err_g = std::max(err_g, std::fabs(dym[i] - dy[i] * s));
        want_dz[size_t(c / group)] += double(dy[i]) * om[i] * s * (1 - s);
      }
      for (int k = 0; k < gates; ++k)
        err_dz = std::max(err_dz, std::fabs(dz[row * dzs + k] - want_dz[size_t(k)]));
    }
    CHECK(err_y < 1e-6);
    CHECK(err_g < 1e-6);
    CHECK(err_dz < 1e-5);

    DeviceBuffer<float> go(o), gz(z), gy(n), gg(n), gdz(dz0), gdy(dy);
    gpu.sigmoid_gate_forward(gy.get(), go.get(), gz.get(), zs, B, T, H, D, group);
    CHECK(same_bits(gy.to_host(), y));
    // the dz columns between gates must stay untouched
    gpu.sigmoid_gate_backward(gg.get(), gdz.get(), dzs, gdy.get(), go.get(), gz.get(), zs, B, T, H,
                              D, group);
    CHECK(same_bits(gg.to_host(), g));
    CHECK(rel_err(gdz.to_host(), dz) < kTol);
    const auto got_dz = gdz.to_host();
    for (size_t row = 0; row < size_t(N); ++row)
      for (int k = gates; k < dzs; ++k) CHECK(got_dz[row * dzs + k] == dz0[row * dzs + k]);
  }
}

TEST_CASE("cuda prepost: ReLA output norms match the CPU backend", "[cuda][emu]") {
  CpuOps cpu;
  CudaOps gpu;
  const int N = 70, C = 100;  // 3 chunks of 32 tokens; C not a multiple of the 128-thread block
  auto u = rnd(size_t(N) * C, 13, -2.f, 2.f), gamma = rnd(size_t(C), 14, 0.5f, 1.5f);
  auto w = rnd(size_t(C), 15), dy = rnd(size_t(N) * C, 16);
  auto dg0 = rnd(size_t(C), 17), dw0 = rnd(size_t(C), 18);
  struct Mode {
    const char* name;
    bool gated, center;
  };
  for (Mode m : {Mode{"gated_rmsnorm", true, false}, Mode{"rmsnorm", false, false},
                 Mode{"layernorm", false, true}}) {
    INFO(m.name);
    const float* wp = m.gated ? w.data() : nullptr;
    std::vector<float> y(u.size()), r(static_cast<size_t>(N)), mu(static_cast<size_t>(N)),
        du(u.size());
    auto dg = dg0, dw = dw0;
    cpu.rela_norm_forward(y.data(), r.data(), mu.data(), u.data(), gamma.data(), wp, N, C, 1e-6f,
                          m.center);
    cpu.rela_norm_backward(du.data(), dg.data(), m.gated ? dw.data() : nullptr, dy.data(), u.data(),
                           r.data(), mu.data(), gamma.data(), wp, N, C, m.center);
    std::vector<float> first_dg;
    for (uint64_t seed : {0, 9}) {
      ScheduleSeed s(seed);
      DeviceBuffer<float> gu(u), gga(gamma), gw(w), gdy(dy), gy(u.size()),
          gr(static_cast<size_t>(N)), gmu(static_cast<size_t>(N)), gdu(u.size()), gdg(dg0),
          gdw(dw0);
      float* gwp = m.gated ? gw.get() : nullptr;
      gpu.rela_norm_forward(gy.get(), gr.get(), gmu.get(), gu.get(), gga.get(), gwp, N, C, 1e-6f,
                            m.center);
      CHECK(rel_err(gy.to_host(), y) < kTol);
      CHECK(rel_err(gr.to_host(), r) < kTol);
      CHECK(rel_err(gmu.to_host(), mu) < kTol);
      gpu.rela_norm_backward(gdu.get(), gdg.get(), m.gated ? gdw.get() : nullptr, gdy.get(),
                             gu.get(), gr.get(), gmu.get(), gga.get(), gwp, N, C, m.center);
      CHECK(rel_err(gdu.to_host(), du) < kTol);
      CHECK(rel_err(gdg.to_host(), dg) < kTol);
      CHECK(rel_err(gdw.to_host(), dw) < kTol);  // untouched (dw0) when not gated
      if (first_dg.empty())
        first_dg = gdg.to_host();
      else
        CHECK(same_bits(gdg.to_host(), first_dg));
    }
  }
}

TEST_CASE("cuda prepost: threshold_tau reads beta on the device and matches c_i", "[cuda][emu]") {
  CpuOps cpu;
  CudaOps gpu;
  const int T = 300, d = 64;
  for (double kappa : {1.0, 3.0}) {  // kappa > 1: the first rows get c_i = 0
    std::vector<float> c(static_cast<size_t>(T));
    attn_util::threshold_c(c.data(), T, kappa, d);
    for (float beta : {1.3f, -0.5f})
      for (bool derivative : {false, true}) {
        INFO("kappa " << kappa << " beta " << beta << " derivative " << derivative);
        const float g = derivative ? (beta > 0.f ? 1.f : 0.f) : std::max(beta, 0.f);
        std::vector<float> ref(c.size()), cpu_out(c.size());
        for (size_t i = 0; i < c.size(); ++i) ref[i] = g * c[i];
        cpu.threshold_tau(cpu_out.data(), &beta, 0.f, derivative, T, kappa, d);
        CHECK(same_bits(cpu_out, ref));
        HostAccessGuard guard;  // beta stays on the device: no host read of it
        DeviceBuffer<float> gbeta(std::vector<float>{beta}), gout(c.size());
        gpu.threshold_tau(gout.get(), gbeta.get(), 0.f, derivative, T, kappa, d);
        CHECK(same_bits(gout.to_host(), ref));
        gpu.threshold_tau(gout.get(), nullptr, beta, derivative, T, kappa, d);  // fixed beta
        CHECK(same_bits(gout.to_host(), ref));
      }
  }
}
