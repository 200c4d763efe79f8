// Collective communication between data-parallel ranks. Implementations: local (one process,
// every collective is the identity); MPI and NCCL implement the same interface.
#pragma once
#include <cstddef>
#include <memory>

namespace tda {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // Sum over ranks, in place (fp32 buffers).
  virtual void all_reduce_sum(float* buf, size_t n) = 0;
  // In-place reduce-scatter: on return rank r's shard [r*n/W, (r+1)*n/W) holds the sum.
  virtual void reduce_scatter_sum(float* buf, size_t n) = 0;
  // In-place all-gather of equal shards of n/W elements.
  virtual void all_gather(float* buf, size_t n) = 0;
  virtual void broadcast(float* buf, size_t n, int root) = 0;
  virtual double all_reduce_sum(double x) = 0;
  virtual void barrier() = 0;
};

class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world() const override { return 1; }
  void all_reduce_sum(float*, size_t) override {}
  void reduce_scatter_sum(float*, size_t) override {}
  void all_gather(float*, size_t) override {}
  void broadcast(float*, size_t, int) override {}
  double all_reduce_sum(double x) override { return x; }
  void barrier() override {}
};

}  // namespace tda
