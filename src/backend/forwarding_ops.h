// ForwardingOps: an Ops decorator base that forwards every method (memory included) to an
// inner backend. Decorators (diagnostics' ProbeOps, the profiler, test recorders) override only
// what they observe or change.
#pragma once
#include <string>

#include "backend/ops.h"

namespace tda {

class ForwardingOps : public Ops {
 public:
  explicit ForwardingOps(Ops& inner) : in_(inner) {}
  const char* name() const override { return in_.name(); }

#define TDA_OP(ret, fn, params, args) \
  ret fn params override {            \
    return in_.fn args;               \
  }
#include "backend/ops.def"

  bool host_memory() const override {
    return in_.host_memory();
  }
  void* alloc_bytes(size_t bytes, const std::string& what) override {
    return in_.alloc_bytes(bytes, what);
  }
  void free_bytes(void* p) override {
    in_.free_bytes(p);
  }
  void upload(void* d, const void* s, size_t b) override {
    in_.upload(d, s, b);
  }
  void download(void* d, const void* s, size_t b) override {
    in_.download(d, s, b);
  }
  void copy(void* d, const void* s, size_t b) override {
    in_.copy(d, s, b);
  }
  Bf16Matmuls* bf16_matmuls() override {
    return in_.bf16_matmuls();
  }
  Device& device() override {
    return in_.device();
  }
  std::string set_attention_impl(const AttentionImplRequest& r) override {
    return in_.set_attention_impl(r);
  }

 protected:
  Ops& in_;
};

}  // namespace tda
