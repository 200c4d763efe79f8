// A vendor's fused softmax attention (cuDNN's SDPA, cudnn_sdpa.cpp), which the kinds whose kernel
// math is softmax attention take on a GPU when attention.impl allows it (attention_vendor.h).
// The contract, every buffer device memory, every call on the backend's stream (common.h):
//   q, k   (B, H, T, ld_qk) bf16 rows, the columns past the head dim zero (the attention kernels'
//          operand copies, attention_operands.cu, are exactly this)
//   v      (B, H, T, ld_v) bf16 rows, likewise
//   o      = softmax_j<=i(scale q_i.k_j) v, bf16 (B, H, T, ld_v)
//   lse_i  = log sum_j<=i exp(scale q_i.k_j), natural log, fp32 (B, H, T)
//   backward: dq, dk (B, H, T, ld_qk) and dv (B, H, T, ld_v), bf16, from dO (B, H, T, ld_v) bf16,
//   o and lse as the forward wrote them; deterministic (the same bits for the same inputs).
// Nothing about the kinds is here: the glue in attention_vendor.cu maps them onto these calls.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>

namespace tda::cuda {

struct SdpaShape {
  int B = 0, H = 0, T = 0;
  int ld_qk = 0, ld_v = 0;  // the head dims the primitive sees: the copies' row widths
  float scale = 0.f;
  bool operator<(const SdpaShape& o) const {
    return std::tie(B, H, T, ld_qk, ld_v, scale) <
           std::tie(o.B, o.H, o.T, o.ld_qk, o.ld_v, o.scale);
  }
};

class SdpaPrimitive {
 public:
  virtual ~SdpaPrimitive() = default;
  // What it is, for the start-up line ("cuDNN 9.19.0, frontend 1.32.0").
  virtual std::string name() const = 0;
  // Builds (once, then cached) what the forward (and, with `backward`, the backward) of this
  // shape runs; "" when it can run, else one line saying why not (the library refused the shape,
  // out of memory, ...). An evaluation's forward-only shapes build no backward.
  virtual std::string prepare(const SdpaShape& s, bool backward) = 0;
  virtual void forward(const SdpaShape& s, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                       uint16_t* o, float* lse) = 0;
  virtual void backward(const SdpaShape& s, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                        const uint16_t* o, const uint16_t* dO, const float* lse, uint16_t* dq,
                        uint16_t* dk, uint16_t* dv) = 0;
};

// The vendor library this binary was built with registers a factory (cudnn_sdpa.cpp, in a build
// that found cuDNN and its frontend); the factory returns null and says why when the library
// cannot be used here (libcudnn not found at run time, too old). Returns true (static initialiser).
using SdpaFactory = std::unique_ptr<SdpaPrimitive> (*)(std::string* why);
bool register_vendor_sdpa(SdpaFactory make);

// The process's primitive, made at the first call; null with *why set when there is none.
SdpaPrimitive* vendor_sdpa(std::string* why);

// Tests: `p` answers vendor_sdpa() while this lives (an independent reference, or a wrong one for
// the self-check's negative control); the previous answer comes back after.
class ScopedVendorSdpa {
 public:
  explicit ScopedVendorSdpa(SdpaPrimitive* p);
  ~ScopedVendorSdpa();
  ScopedVendorSdpa(const ScopedVendorSdpa&) = delete;
  ScopedVendorSdpa& operator=(const ScopedVendorSdpa&) = delete;

 private:
  SdpaPrimitive* prev_;
  bool prev_set_;
};

}  // namespace tda::cuda
