// attention.impl and the self-check that holds a vendor's attention (cuDNN, which no machine here
// can run) to our kernels at its first use: its logic on the emulator, with a stand-in primitive
// (tests/sdpa_reference.h) that is right, or wrong in the ways a vendor call could be (no causal
// mask, a wrong score scale, a refused shape). What a failure must do: one line naming the kind
// and the error, then our kernels for those calls (their results bit for bit), or, --strict, stop.
#include <catch2/catch.hpp>
#include <string>

#include "attention/registry.h"
#include "backend/cuda/attention_vendor.h"
#include "core/config.h"
#include "sdpa_reference.h"
#include "test_cuda_util.h"

using namespace tda;
using namespace tda::cuda_test;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// One softmax call of (B, H, T, D) on device buffers, forward then backward, through CudaOps.
struct Call {
  int B = 2, H = 3, T = 70, D = 64;
  bool two_views = false, row_scale = false;
  DeviceBuffer<float> q, k, v, q2, k2, f, lam, g;
  Call(bool two, bool scaled)
      : two_views(two),
        row_scale(scaled),
        q(rnd(n(), 1)),
        k(rnd(n(), 2)),
        v(rnd(nv(), 3)),
        q2(rnd(n(), 4)),
        k2(rnd(n(), 5)),
        f(rnd(size_t(T), 6, 0.5f, 1.5f)),
        lam(std::vector<float>{0.4f}),
        g(rnd(nv(), 7)) {}
  size_t n() const { return size_t(B) * H * T * D; }
  size_t nv() const { return size_t(B) * H * T * (two_views ? 2 * D : D); }
  // out, stats, dq, dk, dv (and out2, dq2, dk2, drow_lambda) of one run on `ops`.
  std::vector<std::vector<float>> run(CudaOps& ops) {
    const size_t rows = size_t(B) * H * T;
    DeviceBuffer<float> out(nv()), out2(nv()), st(rows * 2), dq(n()), dk(n()), dv(nv()), dq2(n()),
        dk2(n()), drl(rows);
    AttnArgs a;
    a.math = two_views ? AttnMath::kDiffSoftmax : AttnMath::kSoftmax;
    a.B = B;
    a.H = H;
    a.T = T;
    a.Dqk = D;
    a.Dv = two_views ? 2 * D : D;
    a.scale = 0.125f;
    a.q = q.get();
    a.k = k.get();
    a.v = v.get();
    if (two_views) {
      a.q2 = q2.get();
      a.k2 = k2.get();
      a.lambda = lam.get();
      a.out2 = out2.get();
      a.dq2 = dq2.get();
      a.dk2 = dk2.get();
      a.drow_lambda = drl.get();
    }
    if (row_scale) a.q_scale = f.get();  // shared by the heads (h stride 0), as lssa's
    a.out = out.get();
    a.stats = st.get();
    a.dout = g.get();
    a.dq = dq.get();
    a.dk = dk.get();
    a.dv = dv.get();
    ops.attention_forward(a);
    ops.attention_backward(a);
    std::vector<std::vector<float>> r = {out.to_host(), dq.to_host(), dk.to_host(), dv.to_host()};
    if (two_views)
      for (auto* b : {&out2, &dq2, &dk2, &drl}) r.push_back(b->to_host());
    return r;
  }
  AttentionImplRequest request(const std::string& impl, bool strict) const {
    return {impl, strict, two_views ? "diff_softmax" : "softmax",
            two_views ? AttnMath::kDiffSoftmax : AttnMath::kSoftmax};
  }
};

}  // namespace

TEST_CASE("cuda vendor: the self-check passes a correct primitive and it computes the calls",
          "[cuda][emu]") {
  for (const bool two : {false, true})
    for (const bool scaled : {false, true}) {
      if (two && scaled) continue;  // a row scale is served for one view (ops.h)
      INFO("two views " << two << ", row scale " << scaled);
      ReferenceSdpa ref;
      cuda::ScopedVendorSdpa scoped(&ref);
      Call c(two, scaled);
      CudaOps vendor, own;
      const std::string line = vendor.set_attention_impl(c.request("cudnn", true));
      CHECK(contains(line, "reference SDPA (test) for " + c.request("", 0).kind));
      own.set_attention_impl(c.request("own", false));
      const auto got = c.run(vendor), ref_out = c.run(own);
      REQUIRE(vendor.attention_impl().lines().size() == 1);
      const std::string check = vendor.attention_impl().lines()[0];
      INFO(check);
      CHECK(contains(check, "self-check passed"));
      CHECK(vendor.attention_impl().vendor_calls() == 2);
      CHECK(own.attention_impl().own_calls() == 2);
      // the check ran each pass once on its own problem, then each call once more
      CHECK(ref.forwards == (two ? 4 : 2));
      CHECK(ref.backwards == (two ? 4 : 2));
      for (size_t i = 0; i < got.size(); ++i) {
        INFO("output " << i);
        CHECK(rel_err(got[i], ref_out[i]) < 2e-2);
      }
      // a second call of the same shape is not checked again
      c.run(vendor);
      CHECK(vendor.attention_impl().lines().size() == 1);
    }
}

TEST_CASE("cuda vendor: a wrong primitive fails the self-check and the calls run on our kernels",
          "[cuda][emu]") {
  using Mode = ReferenceSdpa::Mode;
  for (const Mode mode : {Mode::kNoCausalMask, Mode::kScale125, Mode::kRefuse})
    for (const bool two : {false, true}) {
      INFO("mode " << int(mode) << ", two views " << two);
      ReferenceSdpa bad(mode);
      cuda::ScopedVendorSdpa scoped(&bad);
      Call c(two, false);
      CudaOps vendor, own;
      vendor.set_attention_impl(c.request("auto", false));
      own.set_attention_impl(c.request("own", false));
      const auto got = c.run(vendor), ref_out = c.run(own);
      REQUIRE(vendor.attention_impl().lines().size() == 1);
      const std::string line = vendor.attention_impl().lines()[0];
      INFO(line);
      CHECK(contains(line, "disagrees with our kernels"));
      CHECK(contains(line, "for " + c.request("", 0).kind));
      CHECK(contains(line, mode == Mode::kRefuse ? "refuses every shape" : "relative error"));
      CHECK(contains(line, "these calls run on our kernels"));
      CHECK(vendor.attention_impl().vendor_calls() == 0);
      CHECK(vendor.attention_impl().own_calls() == 2);
      for (size_t i = 0; i < got.size(); ++i) CHECK(same_bits(got[i], ref_out[i]));
      // --strict: the same line, as an error
      CudaOps strict;
      strict.set_attention_impl(c.request("cudnn", true));
      try {
        c.run(strict);
        FAIL("a strict run went on past a failed self-check");
      } catch (const Error& e) {
        INFO(e.what());
        CHECK(contains(e.what(), "disagrees with our kernels"));
        CHECK(contains(e.what(), "--strict: stopping"));
      }
    }
}

TEST_CASE("cuda vendor: the self-check's error separates right from wrong by a wide margin",
          "[cuda][emu]") {
  using Mode = ReferenceSdpa::Mode;
  AttnArgs like;
  like.math = AttnMath::kDiffSoftmax;
  like.B = 4;
  like.H = 2;
  like.T = 300;  // the check takes T <= 256
  like.Dqk = 64;
  like.Dv = 128;
  like.scale = 0.125f;
  for (const Mode mode : {Mode::kCorrect, Mode::kNoCausalMask, Mode::kScale125}) {
    ReferenceSdpa p(mode);
    const cuda::VendorCheck c = cuda::vendor_self_check(p, like);
    std::printf("vendor self-check, mode %d: largest relative error %.3g in %s\n", int(mode),
                c.worst, c.where.c_str());
    if (mode == Mode::kCorrect) {
      CHECK(c.ok);
      CHECK(c.worst < cuda::kVendorCheckBound / 4);
    } else {
      CHECK_FALSE(c.ok);
      CHECK(c.worst > 4 * cuda::kVendorCheckBound);
    }
  }
}

TEST_CASE("cuda vendor: attention.impl is refused where it cannot be honoured", "[cuda][emu]") {
  CudaOps cuda;
  // no vendor in the emulated build: cudnn is an error, auto says why it runs ours
  auto request = [](const std::string& impl, const std::string& kind) {
    Config cfg = config_from_json(json::object(), "test");
    cfg.attention.kind = kind;
    return AttentionImplRequest{impl, false, kind,
                                make_attention(cfg.model, cfg.attention)->math()};
  };
  try {
    cuda.set_attention_impl(request("cudnn", "softmax"));
    FAIL("cudnn accepted without cuDNN");
  } catch (const Error& e) {
    CHECK(contains(e.what(), "this build has no cuDNN attention"));
  }
  const std::string line = cuda.set_attention_impl(request("auto", "softmax"));
  CHECK(contains(line, "our kernels for softmax"));
  CHECK(contains(line, "this build has no cuDNN attention"));
  CHECK(contains(cuda.set_attention_impl(request("own", "softmax")), "attention.impl own"));
  // a kind whose math is not softmax attention, with a vendor present
  ReferenceSdpa ref;
  cuda::ScopedVendorSdpa scoped(&ref);
  CHECK(contains(cuda.set_attention_impl(request("auto", "tda")), "not for this kind"));
  try {
    cuda.set_attention_impl(request("cudnn", "tda"));
    FAIL("cudnn accepted for tda");
  } catch (const Error& e) {
    CHECK(contains(e.what(), "kind tda cannot run on cuDNN's softmax attention"));
  }
  // the CPU backend has none; a name that is not an implementation is a config error
  CpuOps cpu;
  CHECK_THROWS_WITH(cpu.set_attention_impl(request("cudnn", "softmax")),
                    Catch::Contains("the cpu backend has no cuDNN attention"));
  CHECK(contains(cpu.set_attention_impl(request("auto", "softmax")), "our kernels"));
  CHECK_THROWS_WITH(config_from_json(json{{"attention", {{"impl", "flash"}}}}, "x.json"),
                    Catch::Contains("attention.impl \"flash\" must be auto, own or cudnn"));
  CHECK(config_from_json(json{{"attention", {{"impl", "own"}}}}, "x.json").attention.impl == "own");
}
