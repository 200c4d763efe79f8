// attention.impl on the CUDA backend (attention_vendor.h): the vendor's registration, the choice
// per call, and the self-check that holds a vendor to our kernels before its first use of a shape.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/cuda/attention_vendor.h"
#include "backend/cuda/common.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/timing.h"
#include "core/config.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/rng.h"

namespace tda::cuda {

namespace {
struct Vendor {
  SdpaFactory make = nullptr;
  std::unique_ptr<SdpaPrimitive> made;
  bool tried = false;
  std::string why;                    // why there is none
  SdpaPrimitive* override = nullptr;  // ScopedVendorSdpa
  bool overridden = false;
};
Vendor& vendor() {
  static Vendor v;
  return v;
}

// A device buffer for the self-check alone (freed when it ends).
template <class T>
struct Buf {
  T* p = nullptr;
  size_t n = 0;
  Buf(size_t count, const char* what) : n(count) {
    p = static_cast<T*>(device_alloc(std::max<size_t>(count, 1) * sizeof(T), what));
  }
  ~Buf() {
    if (p) (void)cudaFree(p);
  }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  void upload(const std::vector<T>& h) {
    check(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice), "self-check upload");
  }
  std::vector<T> get() const {
    std::vector<T> h(n);
    check(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), "self-check download");
    return h;
  }
};

// ||x - ref|| / ||ref||; a non-finite value anywhere is an error of infinity.
double rel_l2(const std::vector<float>& x, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) return INFINITY;
    num += double(x[i] - ref[i]) * double(x[i] - ref[i]);
    den += double(ref[i]) * double(ref[i]);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

const char* impl_label(const std::string& impl) {
  return impl == "own" ? "own" : impl == "cudnn" ? "cudnn" : "auto";
}
}  // namespace

bool register_vendor_sdpa(SdpaFactory make) {
  vendor().make = make;
  return true;
}

SdpaPrimitive* vendor_sdpa(std::string* why) {
  Vendor& v = vendor();
  if (v.overridden) {
    if (!v.override && why) *why = "none (a test took it away)";
    return v.override;
  }
  if (!v.tried) {
    v.tried = true;
    if (!v.make)
#if defined(TDA_CUDA_EMU)
      v.why =
          "this build has no cuDNN attention (the CPU's SIMT emulator runs our kernels "
          "alone; scripts/build_cuda.sh builds the GPU binary with it)";
#else
      v.why =
          "this build has no cuDNN attention (its configure found no cuDNN or no "
          "cudnn-frontend headers: docs/cuda.md, \"cuDNN attention\")";
#endif
    else
      v.made = v.make(&v.why);
  }
  if (!v.made && why) *why = v.why;
  return v.made.get();
}

ScopedVendorSdpa::ScopedVendorSdpa(SdpaPrimitive* p)
    : prev_(vendor().override), prev_set_(vendor().overridden) {
  vendor().override = p;
  vendor().overridden = true;
}
ScopedVendorSdpa::~ScopedVendorSdpa() {
  vendor().override = prev_;
  vendor().overridden = prev_set_;
}

VendorCheck vendor_self_check(SdpaPrimitive& p, const AttnArgs& like) {
  VendorCheck r;
  AttnArgs a;
  a.math = like.math;
  a.B = 1;
  a.H = like.H;
  a.T = std::min(like.T, 256);
  a.Dqk = like.Dqk;
  a.Dv = like.Dv;
  a.scale = like.scale;
  a.q_scale_h_stride = like.q_scale ? (like.q_scale_h_stride ? a.T : 0) : 0;
  const bool two = attn_two_views(a.math);
  const size_t rows = size_t(a.H) * a.T, nqk = rows * a.Dqk, nv = rows * a.Dv;
  const size_t nst = rows * size_t(std::max(1, attn_n_stats(a.math)));
  Rng rng(0x5e1fc4ec);
  auto normal = [&](size_t n) {
    std::vector<float> h(n);
    for (auto& x : h) x = rng.normal();
    return h;
  };
  // Inputs. Row scales in [0.5, 1.5], as ssmax's and lssa's are near 1.
  Buf<float> q(nqk, "attention self-check"), k(nqk, "attention self-check"),
      v(nv, "attention self-check"), q2(two ? nqk : 0, "attention self-check"),
      k2(two ? nqk : 0, "attention self-check"), g(nv, "attention self-check"),
      f(like.q_scale ? (a.q_scale_h_stride ? rows : size_t(a.T)) : 0, "attention self-check"),
      lam(1, "attention self-check");
  q.upload(normal(nqk));
  k.upload(normal(nqk));
  v.upload(normal(nv));
  g.upload(normal(nv));
  if (two) {
    q2.upload(normal(nqk));
    k2.upload(normal(nqk));
  }
  if (like.q_scale) {
    std::vector<float> h(f.n);
    for (auto& x : h) x = 0.5f + rng.uniform();
    f.upload(h);
  }
  lam.upload({0.6f});
  a.q = q.p;
  a.k = k.p;
  a.v = v.p;
  a.q2 = two ? q2.p : nullptr;
  a.k2 = two ? k2.p : nullptr;
  a.q_scale = like.q_scale ? f.p : nullptr;
  a.lambda = two ? lam.p : nullptr;
  a.dout = g.p;

  // Outputs of each side: out, out2, stats, dq, dk, dv, dq2, dk2, drow_lambda.
  struct Side {
    Buf<float> out, out2, stats, dq, dk, dv, dq2, dk2, drl;
    Side(size_t nqk_, size_t nv_, size_t nst_, size_t rows_, bool two_)
        : out(nv_, "attention self-check"),
          out2(two_ ? nv_ : 0, "attention self-check"),
          stats(nst_, "attention self-check"),
          dq(nqk_, "attention self-check"),
          dk(nqk_, "attention self-check"),
          dv(nv_, "attention self-check"),
          dq2(two_ ? nqk_ : 0, "attention self-check"),
          dk2(two_ ? nqk_ : 0, "attention self-check"),
          drl(two_ ? rows_ : 0, "attention self-check") {}
    AttnArgs args(AttnArgs x, bool two_) {
      x.out = out.p;
      x.out2 = two_ ? out2.p : nullptr;
      x.stats = stats.p;
      x.dq = dq.p;
      x.dk = dk.p;
      x.dv = dv.p;
      x.dq2 = two_ ? dq2.p : nullptr;
      x.dk2 = two_ ? dk2.p : nullptr;
      x.drow_lambda = two_ ? drl.p : nullptr;
      return x;
    }
  };
  Side own(nqk, nv, nst, rows, two), ven(nqk, nv, nst, rows, two);
  const std::string shape_why = p.prepare(vendor_shape(a), /*backward=*/true);
  if (!shape_why.empty()) {
    r.where = shape_why;
    return r;
  }
  {
    const AttnArgs x = own.args(a, two);
    Buf<uint16_t> ops(attention_operands_scratch(x, true), "attention self-check");
    Buf<float> s(attention_backward_scratch(x), "attention self-check");
    attention_forward(x, ops.p);
    attention_backward(x, s.p, ops.p);
  }
  {
    const AttnArgs x = ven.args(a, two);
    Buf<uint16_t> hs(std::max(vendor_scratch_halves(x, false), vendor_scratch_halves(x, true)),
                     "attention self-check");
    Buf<float> fs(vendor_scratch_floats(x), "attention self-check");
    vendor_attention_forward(p, x, hs.p, fs.p);
    vendor_attention_backward(p, x, hs.p, fs.p);
  }
  const std::pair<const char*, Buf<float> Side::*> tensors[] = {
      {"out", &Side::out}, {"out2", &Side::out2}, {"stats (lse)", &Side::stats},
      {"dq", &Side::dq},   {"dk", &Side::dk},     {"dv", &Side::dv},
      {"dq2", &Side::dq2}, {"dk2", &Side::dk2},   {"drow_lambda", &Side::drl}};
  r.ok = true;
  for (const auto& [name, member] : tensors) {
    if ((own.*member).n == 0) continue;
    const double e = rel_l2((ven.*member).get(), (own.*member).get());
    if (!(e <= r.worst)) {  // NaN or larger
      r.worst = e;
      r.where = name;
    }
  }
  r.ok = r.worst <= kVendorCheckBound;
  return r;
}

std::string AttentionImpl::set(const AttentionImplRequest& r) {
  check_attention_impl(r.impl);
  req_ = r;
  vendor_ = nullptr;
  checked_.clear();
  shapes_.clear();
  const std::string kind = r.kind.empty() ? attn_math_name(r.math) : r.kind;
  check_fwd_block_shape(r.fwd_block_rows, r.fwd_block_keys);
  check_bwd_stages(r.bwd_stages);
  check_attention_tuning(r.tuning);
  tuning_ = AttentionTuning();
  const std::string arch = gpu_device().arch();
  if (r.tuning == "auto" && path_exists(AttentionTuning::default_path(arch)))
    tuning_ = AttentionTuning::load(AttentionTuning::default_path(arch));
  else if (r.tuning != "auto" && r.tuning != "none")
    tuning_ = AttentionTuning::load(r.tuning);
  TDA_CHECK(tuning_.source.empty() || tuning_.arch == arch,
            "attention.tuning " + tuning_.source + " was tuned on " + tuning_.arch + " (" +
                tuning_.device_name + "); this GPU is " + arch + ": run tda tune on it");
  std::string shape;
  if (r.fwd_block_rows || r.fwd_block_keys)
    shape = "; our forward: " + std::to_string(r.fwd_block_rows ? r.fwd_block_rows : 64) + " x " +
            std::to_string(r.fwd_block_keys ? r.fwd_block_keys : 64) + " blocks";
  if (r.bwd_stages == 2) shape += "; our backward: two query tiles in flight (head dims <= 64)";
  if (!r.deterministic)
    shape += std::string("; our backward: one kernel, dq by atomics, where it serves the calls ") +
             (tuning_.source.empty() ? "" : "and the tuning table prefers it ") +
             "(head dims <= 64, entmax at alpha 1.5; not deterministic)";
  if (!tuning_.source.empty())
    shape += "; tuning: " + tuning_.source + " (" + std::to_string(tuning_.entries.size()) +
             " entries, " + tuning_.device_name + ")";
  if (r.impl == "own") return "attention: our kernels (attention.impl own" + shape + ")";
  const std::string refusal = vendor_math_refusal(r.math);
  std::string why;
  SdpaPrimitive* p = refusal.empty() ? vendor_sdpa(&why) : nullptr;
  if (r.impl == "cudnn") {
    TDA_CHECK(refusal.empty(), "attention.impl \"cudnn\": kind " + kind +
                                   " cannot run on cuDNN's softmax attention: " + refusal +
                                   " (attention.impl own or auto runs it on our kernels)");
    TDA_CHECK(p, "attention.impl \"cudnn\": " + why);
  }
  if (!p)
    return "attention: our kernels for " + kind + " (attention.impl auto" + shape +
           "; cuDNN: " + (refusal.empty() ? why : "not for this kind: " + refusal) + ")";
  vendor_ = p;
  return "attention: " + p->name() + " for " + kind + " (attention.impl " + impl_label(r.impl) +
         "; each shape is checked against our kernels at its first call)";
}

AttnFwdShape AttentionImpl::fwd_shape(const AttnArgs& a) const {
  if (req_.fwd_block_rows || req_.fwd_block_keys) return {req_.fwd_block_rows, req_.fwd_block_keys};
  return tuning_.fwd_shape(req_.kind, a.Dqk, a.Dv, a.T);
}

AttnBwdShape AttentionImpl::bwd_shape(const AttnArgs& a) const {
  AttnBwdShape s = tuning_.bwd_shape(req_.kind, a.Dqk, a.Dv, a.T, !req_.deterministic);
  if (req_.bwd_stages) s.stages = req_.bwd_stages;
  return s;
}

SdpaPrimitive* AttentionImpl::vendor_for(const AttnArgs& a, bool backward) {
  if (!vendor_ || !vendor_call_refusal(a).empty()) {
    ++own_calls_;
    return nullptr;
  }
  const std::string kind = req_.kind.empty() ? attn_math_name(a.math) : req_.kind;
  // One self-check per (math, heads, head dims, row-scale layout, scale): what the kernels'
  // code paths depend on. B and T change the problem's size, not its code.
  const Key key{int(a.math), a.H, a.Dqk, a.Dv, a.q_scale ? 1 + (a.q_scale_h_stride != 0) : 0,
                a.scale};
  auto it = checked_.find(key);
  if (it == checked_.end()) {
    const VendorCheck c = vendor_self_check(*vendor_, a);
    const std::string shape = "H " + std::to_string(a.H) + ", head dims " + std::to_string(a.Dqk) +
                              "/" + std::to_string(a.Dv);
    char err[96];
    std::snprintf(err, sizeof err, "largest relative error %.3g (in %s; bound %.3g)", c.worst,
                  c.where.empty() ? "none" : c.where.c_str(), kVendorCheckBound);
    std::string line = "cuda: attention: " + vendor_->name() + " for " + kind + " (" + shape + ")";
    if (c.ok) {
      line += ": self-check passed, " + std::string(err);
    } else {
      line += " disagrees with our kernels: " +
              (c.worst > 0 ? std::string(err) : "it cannot run the check's shape: " + c.where);
      if (req_.strict) throw Error(line + "; --strict: stopping");
      line += "; these calls run on our kernels";
    }
    report(line);
    it = checked_.emplace(key, c.ok).first;
  }
  if (it->second) {
    // The call's own shape (B, T) may still be one the library refuses: then it takes ours.
    const SdpaShape s = vendor_shape(a);
    auto sh = shapes_.find({s, backward});
    if (sh == shapes_.end()) {
      const std::string why = vendor_->prepare(s, backward);
      if (!why.empty()) {
        const std::string line = "cuda: attention: " + vendor_->name() + " cannot run kind " +
                                 kind + " at B " + std::to_string(a.B) + ", T " +
                                 std::to_string(a.T) + ": " + why;
        if (req_.strict) throw Error(line + "; --strict: stopping");
        report(line + "; this shape runs on our kernels");
      }
      sh = shapes_.emplace(std::make_pair(s, backward), why.empty()).first;
    }
    if (sh->second) {
      ++vendor_calls_;
      return vendor_;
    }
  }
  ++own_calls_;
  return nullptr;
}

void AttentionImpl::report(const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
  lines_.push_back(line);
}

}  // namespace tda::cuda
