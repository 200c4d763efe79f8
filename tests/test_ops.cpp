// Every CPU op's backward is the derivative of its forward (finite differences), with a
// negative control showing the tolerance catches a dropped term.
#include <catch2/catch.hpp>
#include <cmath>

#include "backend/cpu/cpu_ops.h"
#include "fd_check.h"

using namespace tda;

// fp32 forward passes with h = 1e-3: rounding noise in (f+ - f-)/2h is ~1e-7*|f|/h ~ 1e-4
// relative for these sizes, so 2e-3 leaves margin while a dropped term gives > 1e-2.
static constexpr double kTol = 2e-3;

TEST_CASE("rmsnorm backward matches finite differences", "[ops]") {
  CpuOps ops;
  const int N = 5, C = 37;
  auto x = random_vec(N * C, 1), w = random_vec(C, 2), R = random_vec(N * C, 3);
  std::vector<float> y(N * C), rstd(N), dx(N * C, 0.f), dw(C, 0.f);
  auto loss = [&] {
    ops.rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
    return dot_d(y.data(), R.data(), y.size());
  };
  loss();
  ops.rmsnorm_backward(dx.data(), dw.data(), R.data(), x.data(), w.data(), rstd.data(), N, C);
  auto rx = fd_directional(x.data(), x.size(), dx.data(), loss, 10);
  auto rw = fd_directional(w.data(), w.size(), dw.data(), loss, 11);
  CHECK(rx.rel_err < kTol);
  CHECK(rw.rel_err < kTol);
  // Negative control: the same check on a gradient missing the mean(h*x) term must fail.
  std::vector<float> bad(N * C);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c) bad[n * C + c] = w[c] * R[n * C + c] * rstd[n];
  CHECK(fd_directional(x.data(), x.size(), bad.data(), loss, 10).rel_err > 10 * kTol);
}

TEST_CASE("gelu backward matches finite differences", "[ops]") {
  CpuOps ops;
  const size_t n = 301;
  auto x = random_vec(n, 4, 2.f), R = random_vec(n, 5);
  std::vector<float> y(n), dx(n);
  auto loss = [&] {
    ops.gelu_forward(y.data(), x.data(), n);
    return dot_d(y.data(), R.data(), n);
  };
  ops.gelu_backward(dx.data(), x.data(), R.data(), n);
  CHECK(fd_directional(x.data(), n, dx.data(), loss, 12).rel_err < kTol);
  // Negative control: dropping the sech^2 term (using only 0.5(1+tanh u)) must fail.
  std::vector<float> bad(n);
  for (size_t i = 0; i < n; ++i) {
    float v = x[i];
    bad[i] = R[i] * 0.5f * (1 + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
  }
  CHECK(fd_directional(x.data(), n, bad.data(), loss, 12).rel_err > 10 * kTol);
}

TEST_CASE("matmul backward matches finite differences", "[ops]") {
  CpuOps ops;
  const int N = 7, C = 13, OC = 11;
  auto x = random_vec(N * C, 6), W = random_vec(OC * C, 7), R = random_vec(N * OC, 8);
  std::vector<float> y(N * OC), dx(N * C), dW(OC * C, 0.f);
  auto loss = [&] {
    ops.matmul_forward(y.data(), x.data(), W.data(), N, C, OC);
    return dot_d(y.data(), R.data(), y.size());
  };
  ops.matmul_backward(dx.data(), dW.data(), R.data(), x.data(), W.data(), N, C, OC, false);
  CHECK(fd_directional(x.data(), x.size(), dx.data(), loss, 13).rel_err < kTol);
  CHECK(fd_directional(W.data(), W.size(), dW.data(), loss, 14).rel_err < kTol);
  // dW accumulates across calls (gradient accumulation): a second call doubles it.
  std::vector<float> dW1 = dW;
  ops.matmul_backward(nullptr, dW.data(), R.data(), x.data(), W.data(), N, C, OC, false);
  for (size_t i = 0; i < dW.size(); ++i) CHECK(dW[i] == Approx(2 * dW1[i]));
}

TEST_CASE("rope backward is the transpose rotation and rope preserves norms", "[ops]") {
  CpuOps ops;
  const int B = 2, T = 9, H = 3, D = 8, row = 40, col0 = 4, half = D / 2;
  std::vector<float> cosv(T * half), sinv(T * half);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < half; ++i) {
      double ang = t * std::pow(10000.0, -2.0 * i / D);
      cosv[t * half + i] = float(std::cos(ang));
      sinv[t * half + i] = float(std::sin(ang));
    }
  auto x = random_vec(B * T * row, 15), R = random_vec(B * H * T * D, 16);
  std::vector<float> y(B * H * T * D), dx(B * T * row, 0.f);
  auto loss = [&] {
    ops.rope_forward(y.data(), x.data(), row, col0, cosv.data(), sinv.data(), B, T, H, D, 0);
    return dot_d(y.data(), R.data(), y.size());
  };
  loss();
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h) {
        double nx = 0, ny = 0;
        for (int d = 0; d < D; ++d) {
          double xv = x[(b * T + t) * row + col0 + h * D + d],
                 yv = y[((b * H + h) * T + t) * D + d];
          nx += xv * xv;
          ny += yv * yv;
        }
        CHECK(ny == Approx(nx).epsilon(1e-5));
      }
  ops.rope_backward(dx.data(), R.data(), row, col0, cosv.data(), sinv.data(), B, T, H, D, 0,
                    nullptr, 0);
  CHECK(fd_directional(x.data(), x.size(), dx.data(), loss, 17).rel_err < kTol);

  // A row scale (ssmax's per head and position, lssa's per position): the transpose of the dout
  // rows scaled beforehand, bit for bit (one fp32 product per element), and not the unscaled one.
  const auto f = random_vec(size_t(H) * T, 18);
  for (int stride : {T, 0}) {
    std::vector<float> Rf(R.size()), want(dx.size(), 0.f), got(dx.size(), 0.f);
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h)
        for (int t = 0; t < T; ++t)
          for (int d = 0; d < D; ++d) {
            const size_t i = ((size_t(b) * H + h) * T + t) * D + d;
            Rf[i] = f[size_t(h) * stride + t] * R[i];
          }
    ops.rope_backward(want.data(), Rf.data(), row, col0, cosv.data(), sinv.data(), B, T, H, D, 0,
                      nullptr, 0);
    ops.rope_backward(got.data(), R.data(), row, col0, cosv.data(), sinv.data(), B, T, H, D, 0,
                      f.data(), stride);
    CHECK(got == want);  // finite values: == is bit equality up to the sign of 0
    CHECK(got != dx);
  }
}

TEST_CASE("fused LM head + cross-entropy loss and gradients exclude the padded vocab", "[ops]") {
  CpuOps ops;
  const int N = 6, C = 10, Vp = 24, Vr = 19;
  auto x = random_vec(N * C, 18), W = random_vec(Vp * C, 19);
  std::vector<int32_t> tgt = {0, 5, 18, 3, 3, 11};
  std::vector<float> losses(N), dx(N * C), dW(Vp * C, 0.f);
  // Reference loss by hand: log-softmax over the first Vr logits only.
  ops.lm_head_loss(losses.data(), nullptr, nullptr, x.data(), W.data(), tgt.data(), N, C, Vp, Vr,
                   0.f);
  for (int n = 0; n < N; ++n) {
    std::vector<double> l(Vr);
    double mx = -1e30;
    for (int v = 0; v < Vr; ++v) {
      l[v] = 0;
      for (int c = 0; c < C; ++c) l[v] += double(x[n * C + c]) * W[v * C + c];
      mx = std::max(mx, l[v]);
    }
    double s = 0;
    for (int v = 0; v < Vr; ++v) s += std::exp(l[v] - mx);
    CHECK(losses[n] == Approx(mx + std::log(s) - l[tgt[n]]).epsilon(1e-5));
  }
  auto loss = [&] {
    ops.lm_head_loss(losses.data(), nullptr, nullptr, x.data(), W.data(), tgt.data(), N, C, Vp, Vr,
                     0.f);
    double s = 0;
    for (float v : losses) s += v;
    return s / N;
  };
  ops.lm_head_loss(losses.data(), dx.data(), dW.data(), x.data(), W.data(), tgt.data(), N, C, Vp,
                   Vr, 1.0f / N);
  CHECK(fd_directional(x.data(), x.size(), dx.data(), loss, 20).rel_err < kTol);
  CHECK(fd_directional(W.data(), W.size(), dW.data(), loss, 21).rel_err < kTol);
  for (int v = Vr; v < Vp; ++v)
    for (int c = 0; c < C; ++c) CHECK(dW[v * C + c] == 0.f);  // padded rows get no gradient
}

TEST_CASE("AdamW matches the scalar definition", "[ops]") {
  CpuOps ops;
  std::vector<float> p = {1.f, -2.f}, g = {0.5f, 0.25f}, m = {0.1f, 0.f}, v = {0.01f, 0.f};
  const float lr = 0.1f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
  const int t = 3;
  std::vector<double> ref(2);
  for (int i = 0; i < 2; ++i) {
    double mi = b1 * m[i] + (1 - b1) * g[i], vi = b2 * v[i] + (1 - b2) * double(g[i]) * g[i];
    double mh = mi / (1 - std::pow(b1, t)), vh = vi / (1 - std::pow(b2, t));
    ref[i] = p[i] - lr * (mh / (std::sqrt(vh) + eps) + wd * p[i]);
  }
  ops.adamw(p.data(), g.data(), m.data(), v.data(), 2, lr, b1, b2, eps, wd, t);
  CHECK(p[0] == Approx(ref[0]).epsilon(1e-6));
  CHECK(p[1] == Approx(ref[1]).epsilon(1e-6));
}
