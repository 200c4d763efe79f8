// Targets that do not count (kIgnoreTarget, backend/ops.h): the fused LM head + cross-entropy
// gives them loss 0 and no gradient, and the mean is over the targets that count, as PyTorch's
// cross_entropy(ignore_index=...). Checked by finite differences, against PyTorch
// (scripts/oracles/xent_oracle.py, float64), and the CUDA kernel against the CPU on the emulator.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "fd_check.h"
#include "test_cuda_util.h"
#include "test_util.h"

using namespace tda;
using namespace tda::cuda_test;

namespace {

// Every third target ignored, the others spread over the real vocabulary.
std::vector<int32_t> masked_targets(int N, int Vr) {
  std::vector<int32_t> t(static_cast<size_t>(N));
  for (int n = 0; n < N; ++n) t[size_t(n)] = n % 3 == 1 ? kIgnoreTarget : (7 * n + 2) % Vr;
  return t;
}

long counted(const std::vector<int32_t>& t) {
  return long(t.size()) - std::count(t.begin(), t.end(), kIgnoreTarget);
}

}  // namespace

TEST_CASE("lm_head_loss: ignored targets add no loss and no gradient and the mean is over the rest",
          "[ops]") {
  CpuOps ops;
  const int N = 9, C = 10, Vp = 24, Vr = 19;
  auto x = random_vec(N * C, 31), W = random_vec(Vp * C, 32);
  const auto tgt = masked_targets(N, Vr);
  const double n_counted = double(counted(tgt));
  REQUIRE(n_counted == 6);
  std::vector<float> losses(N), dx(N * C), dW(Vp * C, 0.f);
  auto mean = [&] {
    ops.lm_head_loss(losses.data(), nullptr, nullptr, x.data(), W.data(), tgt.data(), N, C, Vp, Vr,
                     0.f);
    double s = 0;
    for (float v : losses) s += v;
    return s / n_counted;
  };
  mean();
  // The counted rows' losses are those of an unmasked call; the ignored rows' are 0.
  std::vector<int32_t> plain = tgt;
  for (auto& t : plain) t = t == kIgnoreTarget ? 0 : t;
  std::vector<float> plain_losses(N);
  ops.lm_head_loss(plain_losses.data(), nullptr, nullptr, x.data(), W.data(), plain.data(), N, C,
                   Vp, Vr, 0.f);
  for (int n = 0; n < N; ++n) CHECK(losses[n] == (tgt[n] == kIgnoreTarget ? 0.f : plain_losses[n]));
  ops.lm_head_loss(losses.data(), dx.data(), dW.data(), x.data(), W.data(), tgt.data(), N, C, Vp,
                   Vr, float(1.0 / n_counted));
  for (int n = 0; n < N; ++n)
    if (tgt[n] == kIgnoreTarget)
      for (int c = 0; c < C; ++c) CHECK(dx[n * C + c] == 0.f);
  // fp32 forwards with h = 1e-3: 2e-3 as in test_ops.cpp.
  const double tol = 2e-3;
  CHECK(fd_directional(x.data(), x.size(), dx.data(), mean, 33).rel_err < tol);
  CHECK(fd_directional(W.data(), W.size(), dW.data(), mean, 34).rel_err < tol);
  // Negative control: a mean over all N targets (the unmasked scale) fails the same check.
  std::vector<float> dx_n(N * C), dW_n(Vp * C, 0.f);
  ops.lm_head_loss(losses.data(), dx_n.data(), dW_n.data(), x.data(), W.data(), tgt.data(), N, C,
                   Vp, Vr, 1.0f / N);
  CHECK(fd_directional(x.data(), x.size(), dx_n.data(), mean, 33).rel_err > 10 * tol);
}

TEST_CASE("lm_head_loss with ignored targets matches PyTorch's cross_entropy(ignore_index)",
          "[ops]") {
  const std::string py = source_dir() + "/.venv/bin/python";
  if (!std::filesystem::exists(py)) {
    TDA_SKIP(py << " not found");
  }
  const int N = 23, C = 16, Vp = 40, Vr = 33;
  auto x = random_vec(N * C, 41, 2.f), W = random_vec(Vp * C, 42);
  const auto tgt = masked_targets(N, Vr);
  TempDir dir;
  {
    std::ofstream f(dir.path + "/in.txt");
    f.precision(9);
    f << N << " " << C << " " << Vp << " " << Vr << "\n";
    for (float e : x) f << e << " ";
    for (float e : W) f << e << " ";
    for (int32_t t : tgt) f << t << " ";
  }
  const std::string cmd = py + " " + source_dir() + "/scripts/oracles/xent_oracle.py " + dir.path +
                          "/in.txt " + dir.path + "/out.txt 2>" + dir.path + "/err.txt";
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::ifstream e(dir.path + "/err.txt");
    TDA_SKIP("cross-entropy oracle not runnable (" << rc << "): " << e.rdbuf());
  }
  double ref_loss = 0;
  std::vector<double> ref_dx(size_t(N) * C), ref_dW(size_t(Vp) * C);
  {
    std::ifstream f(dir.path + "/out.txt");
    f >> ref_loss;
    for (auto& e : ref_dx) f >> e;
    for (auto& e : ref_dW) f >> e;
    REQUIRE(f.good());
  }
  CpuOps ops;
  std::vector<float> losses(N), dx(N * C), dW(Vp * C, 0.f);
  ops.lm_head_loss(losses.data(), dx.data(), dW.data(), x.data(), W.data(), tgt.data(), N, C, Vp,
                   Vr, float(1.0 / double(counted(tgt))));
  double sum = 0;
  for (float l : losses) sum += l;
  // fp32 logits and a polynomial expf (relative error < 2e-7) against float64: 1e-5.
  CHECK(sum / double(counted(tgt)) == Approx(ref_loss).epsilon(1e-5));
  auto max_rel = [](const std::vector<float>& got, const std::vector<double>& ref) {
    double scale = 0, err = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      scale = std::max(scale, std::abs(ref[i]));
      err = std::max(err, std::abs(double(got[i]) - ref[i]));
    }
    return err / scale;
  };
  CHECK(max_rel(dx, ref_dx) < 1e-5);
  CHECK(max_rel(dW, ref_dW) < 1e-5);
}

TEST_CASE("cuda: lm_head_loss with ignored targets matches the CPU backend in fp32 and bf16",
          "[cuda][emu]") {
  CpuOps cpu;
  const int N = 70, C = 40, Vp = 128, Vr = 100;
  auto x = rnd(size_t(N) * C, 61, -3.f, 3.f), W = rnd(size_t(Vp) * C, 62);
  const auto dW0 = rnd(size_t(Vp) * C, 63);
  const auto tg = masked_targets(N, Vr);
  const float gs = float(1.0 / double(counted(tg)));
  for (const bool bf16 : {false, true}) {
    INFO("bf16 " << bf16);
    auto round = [&](std::vector<float> v) {
      if (bf16)
        for (auto& e : v) e = __bfloat162float(__float2bfloat16(e));
      return v;
    };
    const auto xr = round(x), Wr = round(W);
    std::vector<float> loss(static_cast<size_t>(N)), dx(size_t(N) * C), dW = dW0;
    cpu.lm_head_loss(loss.data(), dx.data(), dW.data(), xr.data(), Wr.data(), tg.data(), N, C, Vp,
                     Vr, gs);
    CudaOps gpu;
    DeviceBuffer<float> gW(W), gx(x), gl(static_cast<size_t>(N)), gdx(size_t(N) * C), gdW(dW0);
    DeviceBuffer<int32_t> gt(tg);
    if (bf16) gpu.enable_bf16_matmuls(gW.get(), W.size());
    gpu.lm_head_loss(gl.get(), gdx.get(), gdW.get(), gx.get(), gW.get(), gt.get(), N, C, Vp, Vr,
                     gs);
    const auto got_loss = gl.to_host(), got_dx = gdx.to_host();
    // Tolerances as the unmasked tests: test_cuda_ops.cpp (fp32), test_cuda_bf16.cpp (bf16
    // dlogits carry 8 significant bits).
    CHECK(rel_err(got_loss, loss) < 1e-5);
    CHECK(rel_err(got_dx, dx) < (bf16 ? 1e-2 : 1e-5));
    CHECK(rel_err(gdW.to_host(), dW) < (bf16 ? 1e-2 : 1e-5));
    for (int n = 0; n < N; ++n) {
      if (tg[size_t(n)] != kIgnoreTarget) continue;
      CHECK(got_loss[size_t(n)] == 0.f);
      for (int c = 0; c < C; ++c) CHECK(got_dx[size_t(n) * C + c] == 0.f);
    }
  }
}
