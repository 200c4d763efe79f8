// DeviceArray<T>: n elements of T in one backend's memory (Ops::alloc_bytes), freed with it.
// Move-only. On the CPU backend this is a host array; on CUDA it is device memory that host
// code must not dereference: move data with upload()/download()/to_host().
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "backend/ops.h"

namespace tda {

template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  // `what` names the buffer in an out-of-memory error ("activation arena").
  DeviceArray(Ops& ops, size_t n, const std::string& what)
      : ops_(&ops), n_(n), p_(static_cast<T*>(ops.alloc_bytes(n * sizeof(T), what))) {}
  ~DeviceArray() { reset(); }
  DeviceArray(DeviceArray&& o) noexcept { *this = std::move(o); }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      reset();
      std::swap(ops_, o.ops_);
      std::swap(n_, o.n_);
      std::swap(p_, o.p_);
    }
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* data() { return p_; }
  const T* data() const { return p_; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }

  // Elements [offset, offset + n) from / to host memory.
  void upload(const T* host, size_t n, size_t offset = 0) {
    ops_->upload(p_ + offset, host, n * sizeof(T));
  }
  void download(T* host, size_t n, size_t offset = 0) const {
    ops_->download(host, p_ + offset, n * sizeof(T));
  }
  std::vector<T> to_host() const {
    std::vector<T> h(n_);
    if (n_) download(h.data(), n_);
    return h;
  }

  void reset() {
    if (p_) ops_->free_bytes(p_);
    p_ = nullptr;
    n_ = 0;
  }

 private:
  Ops* ops_ = nullptr;
  size_t n_ = 0;
  T* p_ = nullptr;
};

}  // namespace tda
