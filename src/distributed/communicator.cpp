#include "distributed/communicator.h"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <string>

#include "core/error.h"
#if defined(TDA_WITH_MPI)
#include "distributed/mpi_communicator.h"
#endif

namespace tda {

namespace {
// First of `names` that is set, parsed as an int; -1 if none is set. *which names it.
int env_int(std::initializer_list<const char*> names, std::string* which = nullptr) {
  for (const char* n : names) {
    const char* v = std::getenv(n);
    if (v && *v) {
      char* end = nullptr;
      long x = std::strtol(v, &end, 10);
      TDA_CHECK(end && *end == '\0' && x >= 0, std::string("environment variable ") + n + "=\"" +
                                                   v + "\" is not a non-negative integer");
      if (which) *which = n;
      return int(x);
    }
  }
  return -1;
}

// Every launcher's name for the node-local rank, the MPI launchers' own before SLURM_LOCALID: an
// mpirun/mpiexec inside an sbatch script inherits the batch step's SLURM_LOCALID (0 for every
// rank). LOCAL_RANK (torchrun, some srun wrappers) last: the least specific.
void read_local_rank(LaunchEnv& e) {
  const int r =
      env_int({kEnvLocalRank, "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
               "MV2_COMM_WORLD_LOCAL_RANK", "PMIX_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK"},
              &e.local_rank_var);
  e.local_rank = std::max(0, r);
}
}  // namespace

LaunchEnv launch_env() {
  LaunchEnv e;
  // tda's own GPU launcher first: its workers carry no MPI variables.
  if (const char* id = std::getenv(kEnvNcclId); id && *id) {
    e.launched = true;
    e.nccl_id = id;
    e.rank = env_int({kEnvRank});
    e.world = env_int({kEnvWorld});
    read_local_rank(e);
    TDA_CHECK(e.rank >= 0 && e.world >= 1 && e.rank < e.world,
              std::string(kEnvNcclId) + " is set but " + kEnvRank + "/" + kEnvWorld +
                  " do not name a rank of the job");
    return e;
  }
  // Open MPI's mpirun, then PMI launchers (MPICH, srun --mpi=pmi2), then a Slurm job step.
  // SLURM_STEP_NUM_TASKS, not SLURM_NTASKS: the latter is also set in an sbatch script itself,
  // where `tda train --procs N` must still count as a hand-started process.
  int world = env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"});
  if (world < 0) return e;
  e.launched = true;
  e.mpi = true;
  e.world = world;
  e.rank = std::max(0, env_int({"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}));
  read_local_rank(e);
  return e;
}

namespace {
// Registered from another file's static initialiser: a function-local static is constructed on
// first use, whichever initialiser runs first.
NcclHooks& nccl_storage() {
  static NcclHooks hooks;
  return hooks;
}
bool g_have_nccl = false;  // constant-initialised

// MPI_COMM_WORLD, checked against the launcher's environment.
std::unique_ptr<Communicator> mpi_world(const LaunchEnv& e, const MpiFactory& mpi,
                                        int* local_rank) {
  TDA_CHECK(mpi,
            "this tda was built without MPI, which a job started by mpirun/srun needs (its "
            "ranks meet through MPI): rebuild where MPI's development files are installed "
            "(Debian: libopenmpi-dev; clusters: module load openmpi); on one node, `tda train "
            "--gpus N` needs no MPI");
  auto c = mpi(local_rank);
  // The environment and MPI must agree, or the data sharding would silently overlap.
  TDA_CHECK(c->rank() == e.rank && c->world() == e.world,
            "MPI reports rank " + std::to_string(c->rank()) + " of " + std::to_string(c->world()) +
                " but the launcher's environment says rank " + std::to_string(e.rank) + " of " +
                std::to_string(e.world) + " (was tda built against the MPI that launched it?)");
  return c;
}
}  // namespace

void register_nccl(const NcclHooks& hooks) {
  nccl_storage() = hooks;
  g_have_nccl = true;
}

const NcclHooks* nccl_hooks() {
  return g_have_nccl ? &nccl_storage() : nullptr;
}

MpiFactory mpi_factory() {
#if defined(TDA_WITH_MPI)
  return [](int* local_rank) {
    auto c = std::make_unique<MpiCommunicator>();
    *local_rank = c->local_rank();
    return std::unique_ptr<Communicator>(std::move(c));
  };
#else
  return nullptr;
#endif
}

std::unique_ptr<Communicator> make_communicator(const std::string& device, const DistOptions& opt) {
  return make_communicator(device, opt, launch_env(), mpi_factory(), nccl_hooks());
}

std::unique_ptr<Communicator> make_communicator(const std::string& device, const DistOptions& opt,
                                                const LaunchEnv& e, const MpiFactory& mpi,
                                                const NcclHooks* nccl) {
  if (!e.launched) return std::make_unique<LocalCommunicator>();
  const bool self_gpu = !e.nccl_id.empty();
  // `srun -n 1` or `mpirun -np 1` without MPI in the binary: nobody to meet.
  if (!self_gpu && e.world == 1 && !mpi) return std::make_unique<LocalCommunicator>();
  int mpi_local = -1;
  if (device == "cpu" && !self_gpu) return mpi_world(e, mpi, &mpi_local);
  TDA_CHECK(nccl, "train.device \"" + device +
                      "\" with several ranks needs NCCL, which this tda binary was built without");
  // Only the emulated stand-in can reduce host buffers; real NCCL needs the cuda backend.
  TDA_CHECK(device == "cuda" || nccl->host_memory,
            "--gpus needs train.device=cuda (got \"" + device + "\"); use --procs N for CPU ranks");
  const bool gpu = device == "cuda";
  // The GPU before MPI: the launcher's local rank picks it.
  int dev = gpu && (self_gpu || !e.local_rank_var.empty()) ? nccl->bind_device(e.local_rank) : -1;
  std::unique_ptr<Communicator> boot;
  if (!self_gpu) {
    boot = mpi_world(e, mpi, &mpi_local);
    if (gpu && dev < 0) {
      dev = nccl->bind_device(mpi_local);  // no launcher variable: MPI's count picks
    } else if (gpu) {
      TDA_CHECK(mpi_local == e.local_rank,
                "MPI counts this process as rank " + std::to_string(mpi_local) +
                    " on its node but " + e.local_rank_var + "=" + std::to_string(e.local_rank) +
                    " chose its GPU: ranks would share GPUs; fix or unset " + e.local_rank_var);
    }
  }
  return nccl->make(e, std::max(dev, 0), opt, std::move(boot));
}

}  // namespace tda
