// Collective communication between data-parallel ranks. Implementations: local (one process,
// every collective is the identity), MPI (CPU buffers, mpi_communicator.h) and NCCL (GPU
// buffers, nccl_communicator.h, built only with the CUDA backend).
//
// Every implementation must be deterministic: the same inputs on the same number of ranks give
// bit-identical outputs on every run, and every rank receives the same bits. (A reduction whose
// order depends on timing would make runs irreproducible and could let replicas drift apart.)
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
  // In-place reduce-scatter: on return rank r's shard [r*n/W, (r+1)*n/W) holds the sum; the
  // rest of buf is unspecified. n must be a multiple of W.
  virtual void reduce_scatter_sum(float* buf, size_t n) = 0;
  // In-place all-gather of equal shards of n/W elements (n a multiple of W).
  virtual void all_gather(float* buf, size_t n) = 0;
  virtual void broadcast(float* buf, size_t n, int root) = 0;
  virtual double all_reduce_sum(double x) = 0;
  virtual void barrier() = 0;
  // Ends every rank of the job after a fatal error on this one (the others may be blocked in a
  // collective waiting for us). Single-process communicators have nothing to stop.
  virtual void abort_job(int /*code*/) {}
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

// Where this process sits in a job, read from the environment its launcher set
// (Open MPI: OMPI_COMM_WORLD_*, PMI/PMIx: PMI_*, Slurm: SLURM_*). launched is false when
// the process was started by hand (one rank, world 1).
struct LaunchEnv {
  bool launched = false;
  int rank = 0, world = 1, local_rank = 0;
};
LaunchEnv launch_env();

// MPI when the process was started by mpirun/srun (launch_env().launched), local otherwise.
std::unique_ptr<Communicator> make_communicator();

}  // namespace tda
