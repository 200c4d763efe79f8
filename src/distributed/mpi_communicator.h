// Communicator over MPI_COMM_WORLD for CPU (host) buffers.
//
// Reductions are written on point-to-point exchanges instead of MPI_Allreduce, whose summation
// order is implementation-defined: rank r owns shard r and adds the other ranks' contributions
// in a fixed order (r-1, r-2, ... mod W), then an all-gather copies each owner's shard to every
// rank. So results are reproducible for a given world size and identical on all ranks.
#pragma once
#include <vector>

#include "distributed/communicator.h"

namespace tda {

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator();            // MPI_Init_thread (funneled: OpenMP threads never call MPI)
  ~MpiCommunicator() override;  // MPI_Finalize
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  // This process's rank among MPI_COMM_WORLD's processes on its node (MPI_COMM_TYPE_SHARED).
  int local_rank() const { return local_rank_; }
  void all_reduce_sum(float* buf, size_t n) override;
  void reduce_scatter_sum(float* buf, size_t n) override;
  void all_gather(float* buf, size_t n) override;
  void broadcast(float* buf, size_t n, int root) override;
  double all_reduce_sum(double x) override;
  void barrier() override;
  void abort_job(int code) override;

 private:
  int rank_ = 0, world_ = 1, local_rank_ = 0;
  std::vector<float> recv_;  // one piece of a peer's contribution (bounded, see kPiece)
};

}  // namespace tda
