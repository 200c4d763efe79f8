// attention.impl on the CUDA backend: which attention calls a vendor's fused softmax attention
// (sdpa.h) computes in place of our tiled kernels, the glue that maps a call onto it
// (kernels/attention_vendor.cu), and the start-up self-check that holds the vendor to our kernels
// before its first use (attention_impl.cu).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "backend/attention_tuning.h"
#include "backend/cuda/sdpa.h"
#include "backend/ops.h"

namespace tda::cuda {

// Why a vendor's softmax attention cannot compute this math ("" when it can: kSoftmax, and
// kDiffSoftmax as two calls and their combination). The kinds' list of what runs where comes
// from this (tda kinds, docs/attention.md).
std::string vendor_math_refusal(AttnMath m);
// Why it cannot compute this call ("" when it can): the math, diagnostics counters, KV-cache rows
// (q_start > 0), head dims beyond the tiled kernels' buckets.
std::string vendor_call_refusal(const AttnArgs& a);

// The primitive's view of a call: its B, H, T, the copies' row widths, the scale.
SdpaShape vendor_shape(const AttnArgs& a);
// Scratch of one call: bf16 elements (the operand copies, then the primitive's bf16 outputs) and
// floats (two views: their lse rows).
size_t vendor_scratch_halves(const AttnArgs& a, bool backward);
size_t vendor_scratch_floats(const AttnArgs& a);
void vendor_attention_forward(SdpaPrimitive& p, const AttnArgs& a, uint16_t* halves, float* floats);
void vendor_attention_backward(SdpaPrimitive& p, const AttnArgs& a, uint16_t* halves,
                               float* floats);

// The first call of each shape (math, heads, head dims, row scale) runs the vendor and our kernels
// on a small random problem of that shape (B = 1, T <= 256; the call's H, Dqk, Dv, q_scale
// layout, two views and lambda) and compares the forward (out, out2, stats) and every gradient by
// relative L2 error: worst <= kVendorCheckBound passes. Both read the same bf16 operands, so what
// separates a correct vendor from us is the rounding of its bf16 outputs and weights (~1e-3 here);
// a wrong one (mask, scale, layout, a missing term) is off by 0.1 or more.
constexpr double kVendorCheckBound = 2e-2;
struct VendorCheck {
  bool ok = false;
  double worst = 0;   // the largest relative L2 error
  std::string where;  // the tensor it was in ("dq", "out", ...), or why the check could not run
};
VendorCheck vendor_self_check(SdpaPrimitive& p, const AttnArgs& like);

// The choice of the CudaOps that owns it: set() once from attention.impl, then for each call the
// primitive it takes (null: our kernels). The first call of each shape runs the self-check:
// a failure logs one line naming the kind and the error and that shape takes our kernels from then
// on, or, strict, throws that line.
class AttentionImpl {
 public:
  std::string set(const AttentionImplRequest& r);
  SdpaPrimitive* vendor_for(const AttnArgs& a, bool backward);
  // Calls taken by the vendor and by our kernels so far, and the lines the checks printed (bench
  // and tests read them).
  long long vendor_calls() const { return vendor_calls_; }
  long long own_calls() const { return own_calls_; }
  // For a call our kernels take: the forward's block shape (rows and keys, each 0 for the
  // kernels' default), attention.fwd_block_rows and fwd_block_keys where either is set, else the
  // tuning table's choice; and the backward's: dq by atomics never when attention.deterministic,
  // else the table's choice, atomic without one; its stages attention.bwd_stages where set, else
  // the table's, 1 without one.
  AttnFwdShape fwd_shape(const AttnArgs& a) const;
  AttnBwdShape bwd_shape(const AttnArgs& a) const;
  const AttentionTuning& tuning() const { return tuning_; }
  const std::vector<std::string>& lines() const { return lines_; }

 private:
  void report(const std::string& line);  // stderr, and lines_
  AttentionImplRequest req_;
  AttentionTuning tuning_;           // attention.tuning (empty: none)
  SdpaPrimitive* vendor_ = nullptr;  // null: own kernels only
  using Key = std::tuple<int, int, int, int, int, float>;
  std::map<Key, bool> checked_;  // per (math, H, head dims, row scale, scale): check passed
  std::map<std::pair<SdpaShape, bool>, bool> shapes_;  // per call shape and pass: prepared
  long long vendor_calls_ = 0, own_calls_ = 0;
  std::vector<std::string> lines_;
};

}  // namespace tda::cuda
