// The vectorised CPU kernels against their references: the tiled attention kernels
// (attention_stream.cpp) against the scalar one (i, j) at a time skeleton (attention_scalar.cpp),
// fast_expf and the GELU's tanh against libm, the fused optimizer pass against scale + adamw +
// zero, and `tda bench train --profile`.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "attention/common.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/fast_exp.h"
#include "core/config.h"
#include "core/rng.h"
#include "test_util.h"

namespace tda {

namespace {

const float kLambda = 0.6f;  // the two-view kinds' lambda (a device scalar; host memory here)

// Inputs, outputs and gradients of one attention call, filled at random. The threshold kinds'
// q, k have std qk_std_thr (0.15: their cosine-scale scores straddle tau_i).
struct AttnCase {
  AttnMath math;
  int B, H, T, Dk, Dv;
  std::vector<float> q, k, v, q2, k2, tau, dout;
  struct Out {
    std::vector<float> out, out2, stats, surv, dq, dk, dv, dq2, dk2, drow_tau, drow_lambda;
    long long skipped = 0, total = 0;
  };

  AttnCase(AttnMath m, int B_, int H_, int T_, int Dk_, int Dv_, uint64_t seed,
           float qk_std_thr = 0.15f)
      : math(m), B(B_), H(H_), T(T_), Dk(Dk_), Dv(Dv_) {
    Rng rng(seed);
    const bool thr = m == AttnMath::kThreshold || m == AttnMath::kDiffThreshold;
    const float qk_std = thr ? qk_std_thr : 1.f;
    const size_t nqk = size_t(B) * H * T * Dk, nv = size_t(B) * H * T * Dv;
    for (auto* x : {&q, &k, &q2, &k2}) {
      x->resize(nqk);
      for (auto& e : *x) e = qk_std * rng.normal();
    }
    for (auto* x : {&v, &dout}) {
      x->resize(nv);
      for (auto& e : *x) e = rng.normal();
    }
    if (thr) {
      tau.resize(size_t(T));
      attn_util::threshold_c(tau.data(), T, 1.0, Dk);
    }
  }

  AttnArgs args(Out& o) const {
    const size_t nqk = q.size(), nv = v.size(), rows = size_t(B) * H * T;
    o.out.assign(nv, 0.f);
    o.out2.assign(nv, 0.f);
    o.stats.assign(rows * 2, 0.f);
    o.surv.assign(rows * 3, 0.f);
    for (auto* g : {&o.dq, &o.dk, &o.dq2, &o.dk2}) g->assign(nqk, 0.f);
    o.dv.assign(nv, 0.f);
    o.drow_tau.assign(rows, 0.f);
    o.drow_lambda.assign(rows, 0.f);
    AttnArgs a;
    a.math = math;
    a.B = B;
    a.H = H;
    a.T = T;
    a.Dqk = Dk;
    a.Dv = Dv;
    const bool thr = math == AttnMath::kThreshold || math == AttnMath::kDiffThreshold;
    a.scale = thr ? 1.f : 1.f / std::sqrt(float(Dk));
    a.q = q.data();
    a.k = k.data();
    a.v = v.data();
    if (attn_two_views(math)) {
      a.q2 = q2.data();
      a.k2 = k2.data();
    }
    a.tau = tau.empty() ? nullptr : tau.data();
    a.power = 2;
    a.lambda = &kLambda;
    a.out = o.out.data();
    a.out2 = o.out2.data();
    a.stats = o.stats.data();
    a.survivors = o.surv.data();
    a.tiles_skipped = &o.skipped;
    a.tiles_total = &o.total;
    a.dout = dout.data();
    a.dq = o.dq.data();
    a.dk = o.dk.data();
    a.dv = o.dv.data();
    a.dq2 = o.dq2.data();
    a.dk2 = o.dk2.data();
    a.drow_tau = o.drow_tau.data();
    a.drow_lambda = o.drow_lambda.data();
    return a;
  }

  // Forward and backward, through CpuOps (reference = false) or the scalar reference kernels.
  Out run(bool reference, int q_start = 0, bool drop_term = false) const {
    Out o;
    AttnArgs a = args(o);
    a.q_start = q_start;
    if (reference)
      cpu_attention_forward_reference(a);
    else
      CpuOps().attention_forward(a);
    if (q_start == 0) {
      if (reference)
        cpu_attention_backward_reference(a, drop_term);
      else
        cpu_attention_backward(a, drop_term);  // CpuOps::attention_backward when false
    }
    return o;
  }
};

// max |a - b| over max(max |b|, 1e-3): the error relative to the tensor's scale.
double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, m = 1e-3;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::fabs(double(a[i]) - b[i]));
    m = std::max(m, std::fabs(double(b[i])));
  }
  return d / m;
}

// The worst relative difference over every output and gradient. drow_tau only where it is a
// gradient (the rectifiers' dL/dtau): for a softmax it is sum_j a_ij (e_ij - D_i) = 0 up to
// rounding, and its noise has no scale to be relative to.
double worst_diff(const AttnCase::Out& x, const AttnCase::Out& ref, AttnMath m) {
  double w = 0;
  for (auto f : {&AttnCase::Out::out, &AttnCase::Out::out2, &AttnCase::Out::stats,
                 &AttnCase::Out::dq, &AttnCase::Out::dk, &AttnCase::Out::dv, &AttnCase::Out::dq2,
                 &AttnCase::Out::dk2, &AttnCase::Out::drow_lambda})
    w = std::max(w, rel_diff(x.*f, ref.*f));
  const bool normalised =
      m == AttnMath::kSoftmax || m == AttnMath::kSoftplus || m == AttnMath::kDiffSoftmax;
  if (!normalised) w = std::max(w, rel_diff(x.drow_tau, ref.drow_tau));
  return w;
}

const AttnMath kTiledMaths[] = {
    AttnMath::kSoftmax,     AttnMath::kSoftplus, AttnMath::kRelu,         AttnMath::kThreshold,
    AttnMath::kDiffSoftmax, AttnMath::kDiffRelu, AttnMath::kDiffThreshold};

// fp32 with a different summation order and fast_expf (2.3e-7 relative) for expf.
constexpr double kTol = 2e-5;

}  // namespace

TEST_CASE("cpu attention: vectorised kernels match the scalar reference", "[attention][simd]") {
  // T not a multiple of 64 (a partial last tile); head dims with and without a vector tail;
  // Dqk != Dv as in the differential kinds.
  struct Shape {
    int B, H, T, Dk, Dv;
  };
  const Shape shapes[] = {{2, 2, 70, 64, 64}, {1, 3, 130, 24, 40}, {1, 1, 200, 32, 64}};
  for (AttnMath m : kTiledMaths)
    for (const Shape& s : shapes) {
      CAPTURE(int(m), s.T, s.Dk, s.Dv);
      const AttnCase c(m, s.B, s.H, s.T, s.Dk, s.Dv, 11);
      const AttnCase::Out ref = c.run(true), vec = c.run(false);
      CHECK(worst_diff(vec, ref, m) < kTol);
      CHECK(vec.surv == ref.surv);  // survivor counts are exact
      CHECK(vec.skipped == ref.skipped);
      CHECK(vec.total == ref.total);
    }
}

TEST_CASE("cpu attention: q_start rows match the reference and skip the same tiles",
          "[attention][simd]") {
  for (AttnMath m : {AttnMath::kSoftmax, AttnMath::kDiffThreshold}) {
    const AttnCase c(m, 1, 2, 150, 64, 64, 5);
    const AttnCase::Out ref = c.run(true, 100), vec = c.run(false, 100);
    CHECK(rel_diff(vec.out, ref.out) < kTol);
    CHECK(rel_diff(vec.stats, ref.stats) < kTol);
    CHECK(vec.total == ref.total);
    CHECK(vec.skipped == ref.skipped);
  }
}

TEST_CASE("cpu attention: the comparison with the reference rejects a wrong backward",
          "[attention][simd]") {
  // Negative control: the vectorised backward with one term dropped must fail the same bound.
  for (AttnMath m : {AttnMath::kSoftmax, AttnMath::kThreshold, AttnMath::kDiffThreshold}) {
    CAPTURE(int(m));
    const AttnCase c(m, 1, 2, 100, 64, 64, 7);
    CHECK(worst_diff(c.run(false, 0, true), c.run(true), m) > 100 * kTol);
  }
}

TEST_CASE("cpu attention: sparse threshold kinds skip dead tiles at long T", "[attention][simd]") {
  // Small random q, k at T = 512 (scores of std 0.02 against tau_i ~ 0.3-0.4): most tiles are
  // dead, and the vectorised kernel skips exactly the reference's tiles with the same results.
  const AttnCase c(AttnMath::kThreshold, 1, 1, 512, 64, 64, 3, 0.05f);
  const AttnCase::Out ref = c.run(true), vec = c.run(false);
  CHECK(ref.skipped > ref.total / 2);
  CHECK(vec.skipped == ref.skipped);
  CHECK(worst_diff(vec, ref, AttnMath::kThreshold) < kTol);
}

TEST_CASE("fast_expf is within 2.5e-7 of exp and flushes to exact zero", "[ops][simd]") {
  double worst = 0;
  for (float x = -87.f; x < 88.f; x += 0.00731f) {
    const double e = std::exp(double(x));
    worst = std::max(worst, std::fabs(double(fast_expf(x)) - e) / e);
  }
  CHECK(worst < 2.5e-7);
  CHECK(fast_expf(0.f) == 1.f);
  CHECK(fast_expf(-88.f) == 0.f);
  CHECK(fast_expf(-1000.f) == 0.f);
  CHECK(fast_expf(NAN) == 0.f);  // documented: NaN lands on the low clamp
}

TEST_CASE("gelu forward and backward stay within 1e-6 and 5e-6 of the libm tanh formula",
          "[ops][simd]") {
  const size_t n = 4001;
  std::vector<float> x(n), y(n), dy(n, 1.f), dx(n);
  for (size_t i = 0; i < n; ++i) x[i] = -12.f + 24.f * float(i) / float(n - 1);
  CpuOps ops;
  ops.gelu_forward(y.data(), x.data(), n);
  ops.gelu_backward(dx.data(), x.data(), dy.data(), n);
  const double c = 0.7978845608028654;
  double wf = 0, wb = 0;
  for (size_t i = 0; i < n; ++i) {
    const double v = x[i], u = c * (v + 0.044715 * v * v * v), th = std::tanh(u);
    const double f = 0.5 * v * (1 + th);
    const double g = 0.5 * (1 + th) + 0.5 * v * (1 - th * th) * c * (1 + 3 * 0.044715 * v * v);
    wf = std::max(wf, std::fabs(y[i] - f) / std::max(1.0, std::fabs(f)));
    wb = std::max(wb, std::fabs(dx[i] - g) / std::max(1.0, std::fabs(g)));
  }
  // tanh_fast is within ~1.2e-7 of tanh; the derivative multiplies that by about x (2e-6 seen).
  CHECK(wf < 1e-6);
  CHECK(wb < 5e-6);
}

TEST_CASE("adamw_clip_zero is scale + adamw + zero in one pass, bit for bit", "[ops][simd]") {
  const size_t n = 1003;  // a vector tail
  Rng rng(9);
  std::vector<float> p(n), g(n), m(n), v(n);
  for (size_t i = 0; i < n; ++i) {
    p[i] = rng.normal();
    g[i] = rng.normal();
    m[i] = 0.1f * rng.normal();
    v[i] = 0.01f * std::fabs(rng.normal());
  }
  CpuOps ops;
  for (float clip : {1.f, 0.37f}) {
    CAPTURE(clip);
    auto p1 = p, g1 = g, m1 = m, v1 = v, p2 = p, g2 = g, m2 = m, v2 = v;
    if (clip != 1.f) ops.scale(g1.data(), n, clip);
    ops.adamw(p1.data(), g1.data(), m1.data(), v1.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 7);
    ops.adamw_clip_zero(p2.data(), g2.data(), m2.data(), v2.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f,
                        0.1f, 7, clip);
    CHECK(p2 == p1);
    CHECK(m2 == m1);
    CHECK(v2 == v1);
    CHECK(g2 == std::vector<float>(n, 0.f));
  }
  // Negative control: the clip factor reaches the update (equality above is not vacuous).
  auto p1 = p, g1 = g, m1 = m, v1 = v, p2 = p, g2 = g, m2 = m, v2 = v;
  ops.adamw_clip_zero(p1.data(), g1.data(), m1.data(), v1.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f,
                      0.1f, 7, 1.f);
  ops.adamw_clip_zero(p2.data(), g2.data(), m2.data(), v2.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f,
                      0.1f, 7, 0.37f);
  CHECK(m2 != m1);
}

TEST_CASE("bench train --profile accounts for the step by phase and op", "[cli][simd]") {
  std::string out;
  REQUIRE(run_tda("bench train --config " + source_dir() +
                      "/configs/tiny/tda.json --steps 1 --profile --set model.seq_len=64 "
                      "--set train.total_batch_tokens=512",
                  &out) == 0);
  const auto first = out.find('{');
  REQUIRE(first != std::string::npos);
  const json j = json::parse(out.substr(first, out.find('\n', first) - first));
  REQUIRE(j.contains("profile"));
  double sum = 0;
  bool fwd_attn = false, bwd_attn = false, adamw = false, lm_head = false;
  for (const auto& e : j["profile"]) {
    sum += e["ms"].get<double>();
    const std::string op = e["op"], phase = e["phase"];
    fwd_attn |= phase == "forward" && op.rfind("attention_forward", 0) == 0;
    bwd_attn |= phase == "backward" && op.rfind("attention_backward", 0) == 0;
    adamw |= phase == "adamw" && op == "adamw_clip_zero";
    lm_head |= phase == "forward" && op.rfind("lm_head_loss", 0) == 0;
  }
  CHECK(fwd_attn);
  CHECK(bwd_attn);
  CHECK(adamw);
  CHECK(lm_head);
  // The phases (ops plus what ran outside them) cover the timed step.
  const double step = j["ms_per_step_median"].get<double>();
  CHECK(sum <= step * 1.001);
  CHECK(sum >= step * 0.9);
  CHECK(out.find("[phase total]") != std::string::npos);
  // Without --profile: no profile key, the JSON line alone.
  REQUIRE(run_tda("bench train --config " + source_dir() +
                      "/configs/tiny/tda.json --steps 1 --set model.seq_len=64 "
                      "--set train.total_batch_tokens=512",
                  &out) == 0);
  CHECK(out.find("profile") == std::string::npos);
  // The CPU step's yardstick: the backend's own SGEMM at the LM head's shape, timed (like the
  // steps) on the backend's device, the host clock.
  const json plain = json::parse(out.substr(out.find('{')));
  CHECK(plain.at("timer") == "host clock");
  CHECK(plain.at("sgemm_gflops").get<double>() > 0);
  CHECK(plain.at("ratio").get<double>() ==
        Approx(plain.at("gflops").get<double>() / plain.at("sgemm_gflops").get<double>()));
  CHECK(plain.at("sgemm_shape") == json::array({8 * 64, 50304, 128}));
}

}  // namespace tda

TEST_CASE("cpu: OpenBLAS runs kernels for this CPU's instruction set, not a pre-AVX2 fallback",
          "[ops][simd]") {
  // tests/main.cpp re-executed this process with OPENBLAS_CORETYPE where OpenBLAS had fallen
  // back (on an Emerald Rapids Xeon 0.3.21 picks Prescott's SSE3 kernels, 4x slower): the core
  // it now runs must be one that blas_core_upgrade() leaves alone.
  INFO("OpenBLAS core " << tda::blas_core_name() << ", OPENBLAS_CORETYPE="
                        << (std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE")
                                                             : ""));
  CHECK(tda::blas_core_upgrade() == nullptr);
}
