// Communicator over NCCL for GPU (device) buffers: one rank per GPU. Built only with the CUDA
// backend (TDA_WITH_NCCL); the default CPU build compiles nothing here.
//
// The ranks meet through MPI (rank 0 makes the ncclUniqueId and broadcasts it), so the same
// binary works under `tda train --gpus N` (self-launched under mpirun), a user's mpirun and srun.
// Every pointer passed in must be device memory; collectives run on the communicator's stream
// and synchronise before returning (the trainer has no overlap yet).
// Determinism: NCCL's ring/tree reductions use a fixed order for a fixed topology, message size
// and NCCL_ALGO/NCCL_PROTO; set those explicitly when bit-reproducibility across jobs matters.
#pragma once
#ifdef TDA_WITH_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include "dist/communicator.h"

namespace tda {

class NcclCommunicator final : public Communicator {
 public:
  // `bootstrap` (an MpiCommunicator) carries the unique id; local_rank picks the GPU.
  NcclCommunicator(Communicator& bootstrap, int local_rank);
  ~NcclCommunicator() override;
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  void all_reduce_sum(float* buf, size_t n) override;
  void reduce_scatter_sum(float* buf, size_t n) override;
  void all_gather(float* buf, size_t n) override;
  void broadcast(float* buf, size_t n, int root) override;
  double all_reduce_sum(double x) override;  // host scalar, through a device double
  void barrier() override;
  void abort_job(int code) override;

 private:
  void sync();
  Communicator& bootstrap_;
  int rank_ = 0, world_ = 1;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  double* scalar_ = nullptr;  // device scratch for all_reduce_sum(double)
};

}  // namespace tda
#endif  // TDA_WITH_NCCL
