// Collective communication between data-parallel ranks. Implementations: local (one process,
// every collective is the identity), MPI (CPU buffers, mpi_communicator.h) and NCCL (GPU
// buffers, nccl_communicator.h, built only with the CUDA backend, real or emulated).
//
// Every implementation must be deterministic: the same inputs on the same number of ranks give
// bit-identical outputs on every run, and every rank receives the same bits. (A reduction whose
// order depends on timing would make runs irreproducible and could let replicas drift apart.)
#pragma once
#include <cstddef>
#include <memory>
#include <string>

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
  // Whether the float collectives accept device (CUDA) buffers. NCCL does, and also takes host
  // buffers (staged through the device); MPI and local work on host memory only.
  virtual bool device_memory() const { return false; }
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

// Where this process sits in a job, read from the environment its launcher set: tda's own GPU
// launcher (`--gpus N`: TDA_RANK, TDA_WORLD_SIZE, TDA_LOCAL_RANK, TDA_NCCL_ID), Open MPI
// (OMPI_COMM_WORLD_*), PMI/PMIx (PMI_*), Slurm (SLURM_*). launched is false when the process was
// started by hand (one rank, world 1).
struct LaunchEnv {
  bool launched = false;
  bool mpi = false;     // started by mpirun/srun: MPI is the bootstrap
  std::string nccl_id;  // hex ncclUniqueId from tda's GPU launcher (then mpi is false)
  int rank = 0, world = 1, local_rank = 0;
};
LaunchEnv launch_env();

// Environment variables of tda's GPU launcher (dist/launch.h sets them, launch_env reads them).
constexpr const char* kEnvRank = "TDA_RANK";
constexpr const char* kEnvWorld = "TDA_WORLD_SIZE";
constexpr const char* kEnvLocalRank = "TDA_LOCAL_RANK";
constexpr const char* kEnvNcclId = "TDA_NCCL_ID";

// The communicator for this process, from how it was started and the training device:
//   started by hand                      -> local (world 1)
//   device cpu under mpirun/srun         -> MPI
//   device cuda under mpirun/srun        -> NCCL, id broadcast over MPI
//   `tda train --gpus N` worker          -> NCCL, id from TDA_NCCL_ID (no MPI)
std::unique_ptr<Communicator> make_communicator(const std::string& device);

// NCCL lives in the CUDA objects, which tda_lib does not link: nccl_communicator.cpp registers
// these at static-initialisation time when it is linked in.
struct NcclHooks {
  std::unique_ptr<Communicator> (*make)(const LaunchEnv& env,
                                        std::unique_ptr<Communicator> bootstrap);
  std::string (*new_unique_id_hex)();  // ncclGetUniqueId, as hex text
  bool host_memory;                    // the emulated stand-in: "device" buffers are host memory
};
void register_nccl(const NcclHooks& hooks);
const NcclHooks* nccl_hooks();  // null when this binary has no NCCL

}  // namespace tda
