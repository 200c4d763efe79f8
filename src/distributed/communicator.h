// Collective communication between data-parallel ranks. Implementations: local (one process,
// every collective is the identity), MPI (CPU buffers, mpi_communicator.h) and NCCL (GPU
// buffers, nccl_communicator.h, built only with the CUDA backend, real or emulated).
//
// Every implementation must be deterministic: the same inputs on the same number of ranks give
// bit-identical outputs on every run, and every rank receives the same bits. (A reduction whose
// order depends on timing would make runs irreproducible and could let replicas drift apart.)
#pragma once
#include <cstddef>
#include <functional>
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

class LocalCommunicator : public Communicator {
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
  int rank = 0, world = 1;
  // Rank among the job's processes on this node (it picks the GPU), from the first variable set
  // of TDA_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID (MPICH, Intel MPI),
  // MV2_COMM_WORLD_LOCAL_RANK (MVAPICH2), PMIX_LOCAL_RANK, SLURM_LOCALID, LOCAL_RANK.
  // local_rank_var names it; empty when none is set (local_rank 0; under MPI, MPI's own count
  // decides after MPI_Init).
  int local_rank = 0;
  std::string local_rank_var;
};
LaunchEnv launch_env();

// Environment variables of tda's GPU launcher (distributed/launch.h sets them, launch_env reads
// them).
constexpr const char* kEnvRank = "TDA_RANK";
constexpr const char* kEnvWorld = "TDA_WORLD_SIZE";
constexpr const char* kEnvLocalRank = "TDA_LOCAL_RANK";
constexpr const char* kEnvNcclId = "TDA_NCCL_ID";

// Settings of the communicator (config "dist").
struct DistOptions {
  // NCCL: longest wait for one collective (or for the ranks to meet) before this rank aborts the
  // communicator and stops with an error naming the collective. A dead peer on another node is
  // usually reported by NCCL itself, but one that hangs, or dies on this node's NVLink, is not.
  double timeout_s = 600;
};

// NCCL lives in the CUDA objects, which tda_lib does not link: nccl_communicator.cpp registers
// these at static-initialisation time when it is linked in.
struct NcclHooks {
  // Makes this process use CUDA device local_rank % (visible devices), checked and reported
  // (backend/cuda/startup.h); returns it. Runs before MPI_Init and before any other CUDA call.
  std::function<int(int local_rank)> bind_device;
  std::function<std::unique_ptr<Communicator>(const LaunchEnv& env, int device,
                                              const DistOptions& opt,
                                              std::unique_ptr<Communicator> bootstrap)>
      make;
  std::function<std::string()> new_unique_id_hex;  // ncclGetUniqueId, as hex text
  bool host_memory = false;  // the emulated stand-in: "device" buffers are host memory
};
void register_nccl(const NcclHooks& hooks);
const NcclHooks* nccl_hooks();  // null when this binary has no NCCL

// MPI_COMM_WORLD (MPI_Init) and this process's rank among MPI's processes on its node.
using MpiFactory = std::function<std::unique_ptr<Communicator>(int* local_rank)>;
// Null when tda was built without MPI (the CUDA build on a node without its development files).
MpiFactory mpi_factory();

// The communicator for this process, from how it was started and the training device:
//   started by hand                      -> local (world 1)
//   device cpu under mpirun/srun         -> MPI
//   device cuda under mpirun/srun        -> NCCL, id broadcast over MPI
//   `tda train --gpus N` worker          -> NCCL, id from TDA_NCCL_ID (no MPI)
// With device cuda the GPU is chosen from the local rank and bound before MPI_Init (some MPI/UCX
// stacks bind to whatever device is current then), and checked against MPI's local rank after.
std::unique_ptr<Communicator> make_communicator(const std::string& device,
                                                const DistOptions& opt = {});
// The same with the environment, MPI and NCCL given (tests replace them).
std::unique_ptr<Communicator> make_communicator(const std::string& device, const DistOptions& opt,
                                                const LaunchEnv& env, const MpiFactory& mpi,
                                                const NcclHooks* nccl);

}  // namespace tda
