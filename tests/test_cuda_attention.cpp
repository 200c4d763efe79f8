// Causal softmax attention of the CUDA backend (kernels/attention_softmax.cu, emulated) against
// the CPU streaming kernel: forward (out, LSE) and backward (dq, dk, dv) at T = 17, 70, 130
// (not multiples of the 32-key chunk or the CPU's 64 tile) and head dims below and above 32.
// Tolerance: fp32 both sides, online softmax rescaled per 32 keys here and per 64 on the CPU, so
// sums differ in order: rel_err (relative to max |ref|) <= 2e-5 (observed ~1e-6).
#include <catch2/catch.hpp>

#include "core/error.h"
#include "test_cuda_util.h"

using namespace tda;
using namespace tda::cuda_test;

namespace {
struct Case {
  int B, H, T, D;
  size_t stride;  // qk_bh_stride (0 = dense)
};

void run_case(const Case& c, uint64_t seed, std::vector<float>* bits = nullptr) {
  CpuOps cpu;
  CudaOps gpu;
  const size_t BH = size_t(c.B) * c.H, sqk = c.stride ? c.stride : size_t(c.T) * c.D;
  const size_t nqk = BH * sqk, nv = BH * c.T * c.D, rows = BH * c.T;
  auto q = rnd(nqk, 81, -2.f, 2.f), k = rnd(nqk, 82, -2.f, 2.f), v = rnd(nv, 83), g = rnd(nv, 84);
  AttnArgs a;
  a.math = AttnMath::kSoftmax;
  a.B = c.B;
  a.H = c.H;
  a.T = c.T;
  a.Dqk = a.Dv = c.D;
  a.scale = 1.0f / std::sqrt(float(c.D));
  a.qk_bh_stride = c.stride;
  std::vector<float> out(nv), st(rows), dq(nqk, 0.f), dk(nqk, 0.f), dv(nv);
  AttnArgs r = a;
  r.q = q.data();
  r.k = k.data();
  r.v = v.data();
  r.out = out.data();
  r.stats = st.data();
  r.dout = g.data();
  r.dq = dq.data();
  r.dk = dk.data();
  r.dv = dv.data();
  cpu.attention_forward(r);
  cpu.attention_backward(r);

  ScheduleSeed guard(seed);
  DeviceBuffer<float> gq(q), gk(k), gv(v), gg(g), gout(nv), gst(rows),
      gdq(std::vector<float>(nqk, 0.f)), gdk(std::vector<float>(nqk, 0.f)), gdv(nv);
  AttnArgs d = a;
  d.q = gq.get();
  d.k = gk.get();
  d.v = gv.get();
  d.out = gout.get();
  d.stats = gst.get();
  d.dout = gg.get();
  d.dq = gdq.get();
  d.dk = gdk.get();
  d.dv = gdv.get();
  gpu.attention_forward(d);
  gpu.attention_backward(d);
  CHECK(rel_err(gout.to_host(), out) < 2e-5);
  CHECK(rel_err(gst.to_host(), st) < 2e-5);
  CHECK(rel_err(gdq.to_host(), dq) < 2e-5);
  CHECK(rel_err(gdk.to_host(), dk) < 2e-5);
  CHECK(rel_err(gdv.to_host(), dv) < 2e-5);
  if (bits) {
    auto all = gout.to_host();
    for (const auto* b : {&gdq, &gdk, &gdv}) {
      auto h = b->to_host();
      all.insert(all.end(), h.begin(), h.end());
    }
    if (bits->empty())
      *bits = all;
    else
      CHECK(same_bits(all, *bits));
  }
}
}  // namespace

TEST_CASE("cuda: softmax attention forward and backward match the CPU backend", "[cuda][emu]") {
  for (const Case& c : {Case{2, 3, 17, 16, 0}, Case{1, 2, 70, 40, 0}, Case{1, 1, 130, 24, 0},
                        Case{2, 1, 33, 64, 0}}) {
    INFO("B " << c.B << " H " << c.H << " T " << c.T << " D " << c.D);
    run_case(c, 0);
  }
}

TEST_CASE("cuda: softmax attention honours qk_bh_stride", "[cuda][emu]") {
  run_case(Case{2, 2, 19, 8, 19 * 8 * 2 + 3}, 0);
}

TEST_CASE("cuda: softmax attention is bit-identical under shuffled schedules", "[cuda][emu]") {
  std::vector<float> bits;
  for (uint64_t seed : {0, 4, 17}) run_case(Case{1, 2, 45, 40, 0}, seed, &bits);
}

TEST_CASE("cuda: attention kinds other than softmax are refused", "[cuda][emu]") {
  CudaOps gpu;
  AttnArgs a;
  a.math = AttnMath::kRelu;
  CHECK_THROWS_AS(gpu.attention_forward(a), Error);
}

// Negative control: the comparison above can fail. Dropping the row constant D_i from the
// backward (the debug hook both backends implement) must move dq far beyond the tolerance,
// while the two backends still agree with each other when both drop it.
TEST_CASE("cuda: attention backward without the D_i term is caught", "[cuda][emu]") {
  const int B = 1, H = 2, T = 37, D = 16;
  const size_t n = size_t(B) * H * T * D, rows = size_t(B) * H * T;
  auto q = rnd(n, 85, -2.f, 2.f), k = rnd(n, 86, -2.f, 2.f), v = rnd(n, 87), g = rnd(n, 88);
  auto run = [&](Ops& ops, bool drop) {
    DeviceBuffer<float> gq(q), gk(k), gv(v), gg(g), out(n), st(rows), dq(n), dk(n), dv(n);
    AttnArgs a;
    a.B = B;
    a.H = H;
    a.T = T;
    a.Dqk = a.Dv = D;
    a.scale = 0.25f;
    a.q = gq.get();
    a.k = gk.get();
    a.v = gv.get();
    a.out = out.get();
    a.stats = st.get();
    a.dout = gg.get();
    a.dq = dq.get();
    a.dk = dk.get();
    a.dv = dv.get();
    a.debug_drop_term = drop;
    ops.attention_forward(a);
    ops.attention_backward(a);
    return dq.to_host();
  };
  CpuOps cpu;
  CudaOps gpu;
  const auto good = run(gpu, false), bad = run(gpu, true);
  CHECK(rel_err(bad, good) > 1e-2);            // the wrong gradient is far from the right one
  CHECK(rel_err(bad, run(cpu, true)) < 2e-5);  // and both backends implement the hook alike
  CHECK(rel_err(good, run(cpu, false)) < 2e-5);
}
