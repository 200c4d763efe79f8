// Every attention variant, driven as the model drives it (proj -> y, dy -> dproj and the
// gradients of its learnable tensors), on the emulated CUDA backend against the CPU backend,
// with the emulator's host-access guard on: a variant that read or wrote a device buffer from
// the host (a scalar parameter, a threshold table) would crash here.
// Tolerances, as a relative 2-norm error ||got - ref|| / ||ref|| (observed values are printed),
// are each kind's AttentionTraits (cuda_y, cuda_grad; traits_of_math in attention/registry.cpp),
// for these reasons:
// the CUDA attention kernels round q, k, v, dout and the weights to bf16 for the tensor-core
// products (8 significant bits, 2^-9 relative per term) while the CPU is fp32.
// - 2e-2 for y and every gradient of the smooth kinds (observed <= 1.3e-2); 5e-2 for the
//   gradients of tra/tda (p = 2), whose head RMSNorm rescales rows with few, barely surviving
//   keys, so those rows carry a larger relative error (observed 2.5e-2, TRA at T = 17).
// - p = 1 rectifiers (rela, diff_rela, tra/tda with power 1): a score within bf16 rounding of
//   its threshold flips a whole term of the derivative (max(s - tau, 0) has a kink there), and
//   with ~1 survivor per row one flip is a large share of a row's gradient: 0.2 for gradients
//   (observed <= 0.11) and 5e-2 for y (the head RMSNorm rescales rows with tiny outputs;
//   observed 2.5e-2). A lost or misplaced term in the variants' glue is an O(1) error.
// - Scalar parameters (beta, lambda, dex_lambda, and the Diff kinds' lambda vectors, whose
//   gradient is the scalar lambda's times a factor): their gradient is one sum over every row of
//   signed terms that largely cancel (a few survivors per row carry it at small T), so the
//   rounding of each term weighs far more against the total: 0.25 (observed <= 0.16, TRA's beta
//   at T = 17). Dropped weights, a wrong sign or a missed clamp condition are O(1) errors.
// - Diff kinds and TDA at T = 1: y does not depend on lambda (one key: o = (1 - lambda) v, and
//   the head RMSNorm removes the scale), so the lambda gradients are 0 up to rounding on both
//   sides and are not compared there.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <memory>

#include "backend/forwarding_ops.h"
#include "sdpa_reference.h"
#include "test_attention_util.h"
#include "test_cuda_util.h"
#include "test_kinds.h"

using namespace tda;
using namespace tda::cuda_test;

namespace {

constexpr double kScalarTol = 0.25;

double rel_l2(const std::vector<float>& got, const std::vector<float>& ref) {
  double num = 0, den = 1e-30;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

struct Result {
  std::vector<float> y, dproj;
  std::vector<std::vector<float>> dparams;
  long long vendor_calls = 0, own_calls = 0;  // attention calls on each implementation
};

// Negative control: a backend that loses the variants' parameter-gradient reductions.
struct DropRowSums final : ForwardingOps {
  using ForwardingOps::ForwardingOps;
  void head_row_sum(float*, const float*, const float*, float, int, int, int) override {}
};

// The harness's variant, inputs and parameters on CudaOps (device copies of every buffer).
// save_bf16: a fresh variant of the kind told to keep the kernel's bf16 operand copies, as GPT2
// tells it under dtype bf16 (AttentionVariant::save_bf16_operands); an empty Result when the kind
// does not. vendor: attention.impl cudnn with this primitive in cuDNN's place (sdpa.h). atomic:
// attention.deterministic false (our backward adds dq and the row gradients by atomics).
Result run_cuda(AttnHarness& h, bool drop_row_sums = false, bool save_bf16 = false,
                cuda::SdpaPrimitive* vendor = nullptr, bool atomic = false) {
  emu_test::HostAccessGuard guard;
  CudaOps cuda;
  std::unique_ptr<cuda::ScopedVendorSdpa> scoped;
  if (vendor) {
    scoped = std::make_unique<cuda::ScopedVendorSdpa>(vendor);
    cuda.set_attention_impl({"cudnn", /*strict=*/true, h.var->kind(), h.var->math()});
  }
  if (atomic) {
    const std::string line =
        cuda.set_attention_impl({"own", false, h.var->kind(), h.var->math(), 0, false});
    CHECK(line.find("dq by atomics") != std::string::npos);
  }
  DropRowSums dropping(cuda);
  Ops& gpu = drop_row_sums ? static_cast<Ops&>(dropping) : cuda;
  std::unique_ptr<AttentionVariant> saving;
  if (save_bf16) {
    saving = make_attention(h.cfg.model, h.cfg.attention);
    if (!saving->save_bf16_operands(cuda)) return {};
  }
  AttentionVariant& var = saving ? *saving : *h.var;
  using Buf = DeviceBuffer<float>;
  Buf proj(h.proj), cos(h.cos), sin(h.sin), R(h.R), y(h.y.size()), dproj(h.proj.size());
  Buf act(var.act_floats(h.B, h.T)), scratch(var.scratch_floats(h.B, h.T));
  std::vector<std::unique_ptr<Buf>> params, dparams;
  std::vector<float*> p, dp;
  for (const auto& x : h.params) {
    params.push_back(std::make_unique<Buf>(x));
    dparams.push_back(std::make_unique<Buf>(std::vector<float>(x.size(), 0.f)));
    p.push_back(params.back()->get());
    dp.push_back(dparams.back()->get());
  }
  AttnContext c{gpu, h.B, h.T, h.layer, h.cfg.model.n_layer, h.step, cos.get(), sin.get(), 0};
  c.scratch = scratch.get();  // as GPT2 passes it: the backward's scratch, free in the forward
  var.forward(c, proj.get(), y.get(), act.get(), p);
  var.backward(c, proj.get(), R.get(), dproj.get(), act.get(), p, dp, scratch.get());
  Result r{y.to_host(), dproj.to_host(), {}};
  for (const auto& d : dparams) r.dparams.push_back(d->to_host());
  r.vendor_calls = cuda.attention_impl().vendor_calls();
  r.own_calls = cuda.attention_impl().own_calls();
  return r;
}

void check_kind(const std::string& kind, int d_model, int n_head, int T,
                const json& options = json::object(), cuda::SdpaPrimitive* vendor = nullptr,
                bool save_bf16 = false, bool atomic = false) {
  INFO(kind << " " << options.dump() << " d_model " << d_model << " heads " << n_head << " T " << T
            << (vendor ? " on the vendor path" : "") << (atomic ? " atomic backward" : ""));
  AttnHarness h(attn_test_config(kind, d_model, n_head, options), 2, T, 1234 + T);
  h.step = 300;  // dex: inside its lambda anneal (715 steps), both lambda terms active
  Rng rng(99);
  for (auto& p : h.params)  // off the init, so that zero-initialised tensors (dex_W) matter
    for (auto& x : p) x += 0.05f * rng.normal();
  h.grads();
  const Result got = run_cuda(h, false, save_bf16, vendor, atomic);
  if (vendor) {  // every call (forward and backward) took the vendor
    CHECK(got.vendor_calls == 2);
    CHECK(got.own_calls == 0);
  }
  const AttentionTraits tol = h.var->traits();  // the kind's bounds, from its own file
  const double ey = rel_l2(got.y, h.y);
  double worst = rel_l2(got.dproj, h.dproj);
  CHECK(ey < tol.cuda_y);
  CHECK(worst < tol.cuda_grad);
  for (size_t i = 0; i < h.dparams.size(); ++i) {
    const std::string& name = h.specs[i].name;
    if (T == 1 && name.rfind("lambda", 0) == 0) continue;  // identically 0 (header)
    INFO("parameter " << name);
    const double e = rel_l2(got.dparams[i], h.dparams[i]);
    // The Diff kinds' lambda vectors get their gradient through the one scalar lambda
    // (d/dlq1 = dL/dlambda exp(lq1.lk1) lk1, ...): its relative error is that scalar's.
    const bool via_scalar = h.params[i].size() == 1 || name.rfind("lambda_", 0) == 0;
    CHECK(e < (via_scalar ? kScalarTol : tol.cuda_grad));
    worst = std::max(worst, e);
  }
  std::printf("cuda variant %-13s %-28s D %2d T %3d%s: y %.2e, worst gradient %.2e\n", kind.c_str(),
              options.dump().c_str(), d_model / n_head, T,
              vendor   ? (save_bf16 ? " vendor bf16" : " vendor")
              : atomic ? " atomic"
                       : "",
              ey, worst);
}

}  // namespace

TEST_CASE("cuda variants: every kind's forward and all gradients match the CPU backend",
          "[cuda][emu]") {
  for (const auto& kind : test_kinds())                      // every kind (test_kinds.h)
    for (int T : {1, 17, 130}) check_kind(kind, 128, 2, T);  // head dim 64, as every config
}

// attention.deterministic false: our backward with dq and the row gradients (drow_tau,
// drow_lambda, which the variants reduce into beta, lambda and the thresholds' gradients) added by
// atomics, every kind as the model drives it, within the same bounds.
TEST_CASE("cuda variants: every kind with the atomic backward matches the CPU backend",
          "[cuda][emu]") {
  for (const auto& kind : test_kinds())
    for (int T : {17, 130}) check_kind(kind, 128, 2, T, json::object(), nullptr, false, true);
}

// attention.impl cudnn: the kinds whose kernel math is softmax attention, on a stand-in for cuDNN's
// SDPA (tests/sdpa_reference.h: the contract in fp64 loops, outputs rounded to bf16 as cuDNN's),
// as the model drives them, against the CPU backend within each kind's own CUDA bounds: the glue
// of kernels/attention_vendor.cu (the operand copies, the row scale in q's, the two views and
// their combination, lambda's row terms, the fp32 widening into views) for every such kind, with
// and without the bf16 copies kept from the forward. The other kinds must refuse it by name.
TEST_CASE("cuda variants: the softmax-family kinds on a vendor's SDPA match the CPU backend",
          "[cuda][emu]") {
  cuda_test::ReferenceSdpa ref;
  std::vector<std::string> ran, refused;
  for (const auto& kind : test_kinds()) {
    const Config cfg = attn_test_config(kind, 128, 2);
    const AttnMath math = make_attention(cfg.model, cfg.attention)->math();
    if (!cuda::vendor_math_refusal(math).empty()) {
      CudaOps cuda;
      cuda::ScopedVendorSdpa scoped(&ref);
      try {
        cuda.set_attention_impl({"cudnn", false, kind, math});
        FAIL("attention.impl cudnn was accepted for " << kind);
      } catch (const Error& e) {
        CHECK(std::string(e.what()).find("kind " + kind + " cannot run on cuDNN") !=
              std::string::npos);
      }
      refused.push_back(kind);
      continue;
    }
    for (int T : {17, 130}) check_kind(kind, 128, 2, T, json::object(), &ref);
    check_kind(kind, 128, 2, 45, json::object(), &ref, /*save_bf16=*/true);
    ran.push_back(kind);
  }
  if (test_kind("ssmax")) check_kind("ssmax", 128, 2, 45, {{"ssmax_bias", true}}, &ref);
  if (test_kind("gated_softmax"))
    check_kind("gated_softmax", 128, 2, 45, {{"gate_shape", "headwise"}}, &ref);
  if (test_kind("softmax")) check_kind("softmax", 64, 2, 45, json::object(), &ref);  // head dim 32
  INFO("vendor: " << json(ran).dump() << ", refused: " << json(refused).dump());
  for (const char* kind : {"softmax", "gated_softmax", "ssmax", "dex", "diff_softmax"})
    if (test_kind(kind)) CHECK(std::find(ran.begin(), ran.end(), kind) != ran.end());
  for (const char* kind : {"entmax", "lssa", "rela", "diff_rela", "tra", "tda"})
    if (test_kind(kind)) CHECK(std::find(refused.begin(), refused.end(), kind) != refused.end());
}

TEST_CASE("cuda variants: head dim 32 and the variants' options match the CPU backend",
          "[cuda][emu]") {
  for (const auto& kind : {"softmax", "tra", "tda", "diff_softmax", "rela"})
    check_kind(kind, 64, 2, 45);
  check_kind("gated_softmax", 128, 2, 45, {{"gate_shape", "headwise"}});
  check_kind("rela", 128, 2, 45, {{"rela_norm", "rmsnorm"}});
  check_kind("rela", 128, 2, 45, {{"rela_norm", "layernorm"}});
  check_kind("ssmax", 128, 2, 45, {{"ssmax_bias", true}});
  check_kind("tda", 128, 2, 45, {{"learn_beta", false}, {"power", 1}});
  check_kind("entmax", 128, 2, 45, {{"entmax_solver", "bisect"}});
  check_kind("entmax", 128, 2, 45, {{"entmax_solver", "bisect"}, {"entmax_alpha", 1.25}});
  // parameter-matched TDA: two heads of q/k 64 and values 128 (the (64, 128) kernel bucket)
  check_kind("tda", 256, 4, 45, {{"tda_heads", "halved"}});
}

// dtype bf16: a kind that keeps the attention kernel's bf16 copies of q, k, v instead of its fp32
// q, k, v (computed in the backward's scratch, AttnContext::scratch) gives the same y and
// gradients, bit for bit (the backward reads the copies a second cast would make), and saves at
// least 1.3 of its 3 (B, T, C) fp32 slots per layer (the copies take 1.5, plus a tile of
// padding: 0.13 at T = 130, negligible at d12). Two kinds read q or k outside the kernel too:
// - TRA and TDA's L2 norms' backward takes x~ from the copies: x~ rounded to bf16 (2^-9
//   relative), in the projection term of dx = (dx~ - x~ (x~.dx~)) / |x| alone, so y and the
//   scalar gradients stay bit-identical and dproj moves by less than 2^-9;
// - ssmax keeps q in bf16 beside the copies (0.5 more: at least 0.8 saved) for the dots of its
//   scalar gradients, which move by about 2^-9 (sums over rows that partly cancel, so somewhat
//   more); y and dproj stay bit-identical.
// Bounds 4e-3 for dproj and 1e-2 for a scalar parameter's gradient (observed <= 8e-4 and 2.3e-3,
// printed); a copy read at the wrong place (k's for q's, another view's, the scaled q') is an
// O(1) error. Returns false when the kind keeps its fp32 q, k, v.
namespace {
void check_moved(const std::vector<float>& got, const std::vector<float>& ref, bool rounded,
                 const std::string& what, double bound) {
  INFO(what);
  if (!rounded) {
    CHECK(got == ref);
    return;
  }
  const double e = rel_l2(got, ref);
  std::printf("saved bf16 operands: %-40s moves %.2e\n", what.c_str(), e);
  CHECK(e < bound);
  CHECK(e > 0);  // what the kind stored was read: rounded
}

bool check_saving(const std::string& kind, int d_model, int n_head, int T,
                  const json& options = json::object()) {
  INFO(kind << " " << options.dump() << " T " << T);
  AttnHarness h(attn_test_config(kind, d_model, n_head, options), 2, T, 4321 + T);
  const Result ref = run_cuda(h), got = run_cuda(h, false, /*save_bf16=*/true);
  if (got.y.empty()) return false;
  const bool xhat_rounded = kind == "tra" || kind == "tda", q_rounded = kind == "ssmax";
  const std::string at = kind + " " + options.dump() + " T " + std::to_string(T) + ": ";
  CHECK(got.y == ref.y);
  check_moved(got.dproj, ref.dproj, xhat_rounded, at + "dproj", 4e-3);
  for (size_t i = 0; i < h.specs.size(); ++i) {
    const std::string& name = h.specs[i].name;
    check_moved(got.dparams[i], ref.dparams[i], q_rounded && name.rfind("ssmax_", 0) == 0,
                at + name, 1e-2);
  }
  CudaOps cuda;
  auto var = make_attention(h.cfg.model, h.cfg.attention);
  const size_t unsaved = var->act_floats(h.B, T), n = size_t(h.B) * T * d_model;
  REQUIRE(var->save_bf16_operands(cuda));
  CHECK(double(unsaved) - double(var->act_floats(h.B, T)) >=
        (T == 130 ? (q_rounded ? 0.8 : 1.3) * n : 0.));
  return true;
}
}  // namespace

TEST_CASE("cuda variants: saving bf16 operand copies leaves every result bit-identical",
          "[cuda][emu]") {
  std::vector<std::string> saving;
  for (const auto& kind : test_kinds())
    for (int T : {17, 130})
      if (check_saving(kind, 128, 2, T) && T == 130) saving.push_back(kind);
  // parameter-matched TDA: values of 2d, the (64, 128) bucket, so v's copy has wider rows
  if (test_kind("tda")) CHECK(check_saving("tda", 256, 4, 45, {{"tda_heads", "halved"}}));
  if (test_kind("tda"))
    CHECK(check_saving("tda", 128, 2, 45, {{"learn_beta", false}, {"power", 1}}));
  if (test_kind("ssmax")) CHECK(check_saving("ssmax", 128, 2, 45, {{"ssmax_bias", true}}));
  // every built-in kind does (a kind added in its own file may keep fp32 q, k, v: it opts in)
  INFO("saving: " << json(saving).dump());
  for (const char* kind : {"softmax", "gated_softmax", "ssmax", "entmax", "lssa", "rela",
                           "diff_softmax", "dex", "diff_rela", "tra", "tda"})
    if (test_kind(kind)) CHECK(std::find(saving.begin(), saving.end(), kind) != saving.end());
}

TEST_CASE("cuda variants: the comparison catches a lost parameter-gradient reduction",
          "[cuda][emu]") {
  AttnHarness h(attn_test_config("tda", 128, 2), 2, 64, 7);
  h.grads();
  const Result good = run_cuda(h), bad = run_cuda(h, true);
  for (size_t i = 0; i < h.specs.size(); ++i) {
    if (h.specs[i].name == "gamma") continue;  // the head RMSNorm's gain has its own reduction
    INFO(h.specs[i].name);
    CHECK(rel_l2(good.dparams[i], h.dparams[i]) < kScalarTol);
    CHECK(rel_l2(bad.dparams[i], h.dparams[i]) > 0.9);  // lambda and beta stay 0
  }
}
