// CudaOps (kernels/*.cu on the SIMT emulator) against CpuOps, method by method, on random inputs
// at sizes that are not multiples of the block or tile sizes. Tolerances: both backends are
// fp32 with fp32 accumulation; where they sum in a different order the error is a few ulps of
// the tensor's scale, so rel_err (relative to max |ref|) <= 1e-5 unless stated otherwise.
// Matmuls run on the same CPU SGEMM under the emulator and are compared bit for bit.
#include <catch2/catch.hpp>

#include "backend/embedding_plan.h"
#include "test_cuda_util.h"

using namespace tda;
using namespace tda::cuda_test;

namespace {
constexpr double kTol = 1e-5;
}

TEST_CASE("cuda: matmul forward and backward match the CPU backend", "[cuda][emu]") {
  const int N = 37, C = 100, OC = 70;
  CpuOps cpu;
  CudaOps gpu;
  auto x = rnd(size_t(N) * C, 1), W = rnd(size_t(OC) * C, 2), dy = rnd(size_t(N) * OC, 3);
  auto dx0 = rnd(size_t(N) * C, 4), dW0 = rnd(size_t(OC) * C, 5);
  DeviceBuffer<float> dxx(x), dW(W), ddy(dy), dyy(size_t(N) * OC);
  std::vector<float> y(size_t(N) * OC);
  cpu.matmul_forward(y.data(), x.data(), W.data(), N, C, OC);
  gpu.matmul_forward(dyy.get(), dxx.get(), dW.get(), N, C, OC);
  CHECK(same_bits(dyy.to_host(), y));  // same SGEMM under the emulator
  for (bool acc : {false, true}) {
    auto rdx = dx0, rdW = dW0;
    DeviceBuffer<float> gdx(dx0), gdW(dW0);
    cpu.matmul_backward(rdx.data(), rdW.data(), dy.data(), x.data(), W.data(), N, C, OC, acc);
    gpu.matmul_backward(gdx.get(), gdW.get(), ddy.get(), dxx.get(), dW.get(), N, C, OC, acc);
    CHECK(same_bits(gdx.to_host(), rdx));
    CHECK(same_bits(gdW.to_host(), rdW));
  }
  // dx = null skips that product
  auto rdW = dW0;
  DeviceBuffer<float> gdW(dW0);
  cpu.matmul_backward(nullptr, rdW.data(), dy.data(), x.data(), W.data(), N, C, OC, false);
  gpu.matmul_backward(nullptr, gdW.get(), ddy.get(), dxx.get(), dW.get(), N, C, OC, false);
  CHECK(same_bits(gdW.to_host(), rdW));
}

TEST_CASE("cuda: rmsnorm forward and backward match the CPU backend", "[cuda][emu]") {
  CpuOps cpu;
  CudaOps gpu;
  for (int C : {100, 37}) {
    const int N = 37;  // 10 blocks of 4 rows, the last one partial; dw chunks of 32 rows: 2
    auto x = rnd(size_t(N) * C, 11, -2.f, 2.f), w = rnd(size_t(C), 12, 0.5f, 1.5f);
    auto dy = rnd(size_t(N) * C, 13), dx0 = rnd(size_t(N) * C, 14), dw0 = rnd(size_t(C), 15);
    std::vector<float> y(x.size()), rstd(static_cast<size_t>(N));
    cpu.rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
    auto dx = dx0, dw = dw0;
    cpu.rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), rstd.data(), N, C);
    std::vector<float> first_dx, first_dw;
    for (uint64_t seed : {0, 3, 11}) {  // shuffled schedules: the warp reductions must not care
      ScheduleSeed guard(seed);
      DeviceBuffer<float> gx(x), gw(w), gy(x.size()), gr(static_cast<size_t>(N)), gdy(dy), gdx(dx0),
          gdw(dw0);
      gpu.rmsnorm_forward(gy.get(), gr.get(), gx.get(), gw.get(), N, C, 1e-5f);
      CHECK(rel_err(gy.to_host(), y) < kTol);
      CHECK(rel_err(gr.to_host(), rstd) < kTol);
      gpu.rmsnorm_backward(gdx.get(), gdw.get(), gdy.get(), gx.get(), gw.get(), gr.get(), N, C);
      CHECK(rel_err(gdx.to_host(), dx) < kTol);
      CHECK(rel_err(gdw.to_host(), dw) < kTol);
      if (seed == 0) {
        first_dx = gdx.to_host();
        first_dw = gdw.to_host();
      } else {  // deterministic: bit-identical under every schedule
        CHECK(same_bits(gdx.to_host(), first_dx));
        CHECK(same_bits(gdw.to_host(), first_dw));
      }
    }
    // In place (y aliases x), as the differential attention kinds call it.
    DeviceBuffer<float> gx(x), gw(w), gr(static_cast<size_t>(N));
    gpu.rmsnorm_forward(gx.get(), gr.get(), gx.get(), gw.get(), N, C, 1e-5f);
    CHECK(rel_err(gx.to_host(), y) < kTol);
  }
}

TEST_CASE("cuda: pointwise ops match the CPU backend", "[cuda][emu]") {
  CpuOps cpu;
  CudaOps gpu;
  const size_t n = 1037;
  auto a = rnd(n, 21, -4.f, 4.f), b = rnd(n, 22), dy = rnd(n, 23);
  DeviceBuffer<float> ga(a), gb(b), gdy(dy), gy(n);
  std::vector<float> y(n);
  // Same float expressions; tanhf is libm's on both sides under the emulator (a GPU's tanhf
  // differs by ulps, hence the tolerance rather than bit equality).
  cpu.gelu_forward(y.data(), a.data(), n);
  gpu.gelu_forward(gy.get(), ga.get(), n);
  CHECK(rel_err(gy.to_host(), y) < kTol);
  cpu.gelu_backward(y.data(), a.data(), dy.data(), n);
  gpu.gelu_backward(gy.get(), ga.get(), gdy.get(), n);
  CHECK(rel_err(gy.to_host(), y) < kTol);
  // dx aliasing dy, as GPT2::backward calls it
  auto r = dy;
  cpu.gelu_backward(r.data(), a.data(), r.data(), n);
  gpu.gelu_backward(gdy.get(), ga.get(), gdy.get(), n);
  CHECK(rel_err(gdy.to_host(), r) < kTol);

  cpu.add(y.data(), a.data(), b.data(), n);
  gpu.add(gy.get(), ga.get(), gb.get(), n);
  CHECK(same_bits(gy.to_host(), y));
  cpu.add_inplace(y.data(), b.data(), n);
  gpu.add_inplace(gy.get(), gb.get(), n);
  CHECK(same_bits(gy.to_host(), y));
  cpu.scale(y.data(), n, 0.37f);
  gpu.scale(gy.get(), n, 0.37f);
  CHECK(same_bits(gy.to_host(), y));
  gpu.zero(gy.get(), n);
  CHECK(gy.to_host() == std::vector<float>(n, 0.f));
}

TEST_CASE("embedding plan: rows grouped by token, in increasing row order", "[cuda][emu]") {
  const std::vector<int32_t> tok = {3, 1, 3, 0, 1, 3};
  std::vector<int32_t> plan(embedding_plan_size(6), -7);
  REQUIRE(plan.size() == 20);
  embedding_plan(tok.data(), 6, plan.data());
  // [S | order (6) | seg_token (6, S used) | seg_start (7, S + 1 used)], unused entries 0
  CHECK(plan == std::vector<int32_t>{3, 3, 1, 4, 0, 2, 5, 0, 1, 3, 0, 0, 0, 0, 1, 3, 6, 0, 0, 0});
}

TEST_CASE("cuda: embedding forward and backward match the CPU backend", "[cuda][emu]") {
  CpuOps cpu;
  CudaOps gpu;
  const int V = 600, C = 300;  // C > 256: a thread walks several channels in backward
  // 7 distinct ids over 37 rows (many repeats), and 1000 rows over 500 ids (many segments).
  for (auto [N, ids] : {std::pair<int, int>{37, 7}, std::pair<int, int>{1000, 500}}) {
    INFO("N " << N << " ids " << ids);
    auto wte = rnd(size_t(V) * C, 31), dy = rnd(size_t(N) * C, 32), dwte0 = rnd(size_t(V) * C, 33);
    auto tok = tokens(size_t(N), ids, 34);
    DeviceBuffer<float> gw(wte), gdy(dy), gy(size_t(N) * C), gdw(dwte0);
    DeviceBuffer<int32_t> gt(tok);
    std::vector<float> y(size_t(N) * C);
    auto dw = dwte0;
    cpu.embedding_forward(y.data(), tok.data(), wte.data(), N, C);
    gpu.embedding_forward(gy.get(), gt.get(), gw.get(), N, C);
    CHECK(same_bits(gy.to_host(), y));
    std::vector<int32_t> plan(embedding_plan_size(N));
    embedding_plan(tok.data(), N, plan.data());
    DeviceBuffer<int32_t> gplan(plan);
    cpu.embedding_backward(dw.data(), dy.data(), tok.data(), plan.data(), N, C);
    gpu.embedding_backward(gdw.get(), gdy.get(), gt.get(), gplan.get(), N, C);
    CHECK(same_bits(gdw.to_host(), dw));  // each token's rows in increasing order: bit-identical
    // Fewer blocks than tokens (each block takes every 3rd token), in a shuffled block order.
    ScheduleSeed seed(7);
    DeviceBuffer<float> gdw3(dwte0);
    cuda::embedding_backward(gdw3.get(), gdy.get(), gplan.get(), N, C, 3);
    CHECK(same_bits(gdw3.to_host(), dw));
  }
}

TEST_CASE("cuda: rope and head split and merge match the CPU backend", "[cuda][emu]") {
  CpuOps cpu;
  CudaOps gpu;
  const int B = 2, T = 17, H = 3, D = 10, pos0 = 3, Tmax = 30, row = 3 * H * D + 7, col0 = 5;
  const size_t nrows = size_t(B) * T * row, nheads = size_t(B) * H * T * D;
  auto x = rnd(nrows, 41), g = rnd(nheads, 42), cs = rnd(size_t(Tmax) * D / 2, 43),
       sn = rnd(size_t(Tmax) * D / 2, 44);
  DeviceBuffer<float> gx(x), gg(g), gc(cs), gs(sn), gout(nheads), gdx(x);
  std::vector<float> out(nheads), dx = x;
  cpu.rope_forward(out.data(), x.data(), row, col0, cs.data(), sn.data(), B, T, H, D, pos0);
  gpu.rope_forward(gout.get(), gx.get(), row, col0, gc.get(), gs.get(), B, T, H, D, pos0);
  CHECK(same_bits(gout.to_host(), out));
  cpu.rope_backward(dx.data(), g.data(), row, col0, cs.data(), sn.data(), B, T, H, D, pos0, nullptr,
                    0);
  gpu.rope_backward(gdx.get(), gg.get(), row, col0, gc.get(), gs.get(), B, T, H, D, pos0, nullptr,
                    0);
  CHECK(same_bits(gdx.to_host(), dx));  // columns outside the slice keep their values
  // with a row scale (per head and position, and shared by the heads)
  const auto f = rnd(size_t(H) * T, 45);
  DeviceBuffer<float> gf(f);
  for (int stride : {T, 0}) {
    std::vector<float> sdx = x;
    DeviceBuffer<float> gsdx(x);
    cpu.rope_backward(sdx.data(), g.data(), row, col0, cs.data(), sn.data(), B, T, H, D, pos0,
                      f.data(), stride);
    gpu.rope_backward(gsdx.get(), gg.get(), row, col0, gc.get(), gs.get(), B, T, H, D, pos0,
                      gf.get(), stride);
    CHECK(same_bits(gsdx.to_host(), sdx));
    CHECK_FALSE(same_bits(sdx, dx));
  }
  cpu.split_heads(out.data(), x.data(), row, col0 + 1, B, T, H, D);
  gpu.split_heads(gout.get(), gx.get(), row, col0 + 1, B, T, H, D);
  CHECK(same_bits(gout.to_host(), out));
  cpu.merge_heads(dx.data(), g.data(), row, col0 + 2, B, T, H, D);
  gpu.merge_heads(gdx.get(), gg.get(), row, col0 + 2, B, T, H, D);
  CHECK(same_bits(gdx.to_host(), dx));
}

TEST_CASE("cuda: lm_head_loss matches the CPU backend across row chunks", "[cuda][emu]") {
  CpuOps cpu;
  CudaOps gpu;
  const int C = 40, Vp = 128, Vr = 100;
  for (int N : {37, 1100}) {  // 1100 rows: a full chunk of 1024 and a partial one
    INFO("N = " << N);
    auto x = rnd(size_t(N) * C, 51, -3.f, 3.f), W = rnd(size_t(Vp) * C, 52);
    auto dW0 = rnd(size_t(Vp) * C, 53);
    auto tg = tokens(size_t(N), Vr, 54);
    std::vector<float> loss(static_cast<size_t>(N)), dx(size_t(N) * C);
    auto dW = dW0;
    const float gs = 1.0f / N;
    cpu.lm_head_loss(loss.data(), dx.data(), dW.data(), x.data(), W.data(), tg.data(), N, C, Vp, Vr,
                     gs);
    std::vector<float> first;
    for (uint64_t seed : {0, 5}) {
      ScheduleSeed guard(seed);
      DeviceBuffer<float> gx(x), gW(W), gl(static_cast<size_t>(N)), gdx(size_t(N) * C), gdW(dW0);
      DeviceBuffer<int32_t> gt(tg);
      gpu.lm_head_loss(gl.get(), gdx.get(), gdW.get(), gx.get(), gW.get(), gt.get(), N, C, Vp, Vr,
                       gs);
      // The CPU uses a polynomial expf (relative error < 2e-7), the kernel libm/CUDA expf.
      CHECK(rel_err(gl.to_host(), loss) < kTol);
      CHECK(rel_err(gdx.to_host(), dx) < kTol);
      CHECK(rel_err(gdW.to_host(), dW) < kTol);
      if (seed == 0)
        first = gdW.to_host();
      else
        CHECK(same_bits(gdW.to_host(), first));
      // Loss only: no gradient buffers touched.
      DeviceBuffer<float> gl2(static_cast<size_t>(N));
      gpu.lm_head_loss(gl2.get(), nullptr, nullptr, gx.get(), gW.get(), gt.get(), N, C, Vp, Vr, gs);
      CHECK(same_bits(gl2.to_host(), gl.to_host()));
    }
    std::vector<float> logits(static_cast<size_t>(Vp));
    DeviceBuffer<float> gx(x), gW(W), glog(static_cast<size_t>(Vp));
    cpu.lm_head_logits(logits.data(), x.data() + C, W.data(), C, Vp);
    gpu.lm_head_logits(glog.get(), gx.get() + C, gW.get(), C, Vp);
    CHECK(rel_err(glog.to_host(), logits) < kTol);  // sgemv vs sgemm: summation order
  }
}

TEST_CASE("cuda: sum_squares is deterministic and matches the CPU backend", "[cuda][emu]") {
  CpuOps cpu;
  CudaOps gpu;
  for (size_t n : {size_t(1), size_t(1037), size_t(300007)}) {
    auto x = rnd(n, 61, -3.f, 3.f);
    DeviceBuffer<float> gx(x);
    const double ref = cpu.sum_squares(x.data(), n);
    double first = 0.0;
    for (uint64_t seed : {0, 2, 9}) {
      ScheduleSeed guard(seed);
      const double got = gpu.sum_squares(gx.get(), n);
      CHECK(std::fabs(got - ref) <= 1e-12 * ref);  // double accumulation, different order
      if (seed == 0)
        first = got;
      else
        CHECK(got == first);  // fixed split and tree: the same bits under any schedule
    }
  }
}

TEST_CASE("cuda: adamw matches the CPU backend", "[cuda][emu]") {
  CpuOps cpu;
  CudaOps gpu;
  const size_t n = 1037;
  auto p = rnd(n, 71), g = rnd(n, 72), m = rnd(n, 73, -0.1f, 0.1f), v = rnd(n, 74, 0.f, 0.01f);
  DeviceBuffer<float> gp(p), gg(g), gm(m), gv(v);
  for (int t = 1; t <= 3; ++t) {
    cpu.adamw(p.data(), g.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, t);
    gpu.adamw(gp.get(), gg.get(), gm.get(), gv.get(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, t);
  }
  // Same expression; only FMA contraction may differ between compilers: a few ulps.
  CHECK(rel_err(gp.to_host(), p) < 1e-6);
  CHECK(rel_err(gm.to_host(), m) < 1e-6);
  CHECK(rel_err(gv.to_host(), v) < 1e-6);
}

// The optimizer's pass (clip, AdamW, g = 0) in one kernel: the same bits as the three kernels it
// replaces (Ops' composition: scale, adamw, zero), and the CPU's one pass within a few ulps.
TEST_CASE("cuda: the fused adamw_clip_zero equals scale + adamw + zero bit for bit",
          "[cuda][emu]") {
  CpuOps cpu;
  CudaOps gpu;
  const size_t n = 1037;
  for (const float s : {1.0f, 0.37f}) {
    INFO("grad_scale " << s);
    auto p = rnd(n, 81), m = rnd(n, 83, -0.1f, 0.1f), v = rnd(n, 84, 0.f, 0.01f);
    DeviceBuffer<float> fp(p), fm(m), fv(v), cp(p), cm(m), cv(v);
    for (int t = 1; t <= 3; ++t) {
      auto g = rnd(n, 82 + t);
      DeviceBuffer<float> fg(g), cg(g);
      gpu.adamw_clip_zero(fp.get(), fg.get(), fm.get(), fv.get(), n, 1e-3f, 0.9f, 0.95f, 1e-8f,
                          0.1f, t, s);
      gpu.Ops::adamw_clip_zero(cp.get(), cg.get(), cm.get(), cv.get(), n, 1e-3f, 0.9f, 0.95f, 1e-8f,
                               0.1f, t, s);
      cpu.adamw_clip_zero(p.data(), g.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f,
                          0.1f, t, s);
      CHECK(same_bits(fg.to_host(), std::vector<float>(n, 0.f)));
      CHECK(same_bits(fg.to_host(), cg.to_host()));
    }
    CHECK(same_bits(fp.to_host(), cp.to_host()));
    CHECK(same_bits(fm.to_host(), cm.to_host()));
    CHECK(same_bits(fv.to_host(), cv.to_host()));
    CHECK(rel_err(fp.to_host(), p) < 1e-6);
    CHECK(rel_err(fv.to_host(), v) < 1e-6);
  }
}
