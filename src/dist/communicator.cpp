#include "dist/communicator.h"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <string>

#include "core/error.h"
#include "dist/mpi_communicator.h"

namespace tda {

namespace {
// First of `names` that is set, parsed as an int; -1 if none is set.
int env_int(std::initializer_list<const char*> names) {
  for (const char* n : names) {
    const char* v = std::getenv(n);
    if (v && *v) {
      char* end = nullptr;
      long x = std::strtol(v, &end, 10);
      TDA_CHECK(end && *end == '\0' && x >= 0, std::string("environment variable ") + n + "=\"" +
                                                   v + "\" is not a non-negative integer");
      return int(x);
    }
  }
  return -1;
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
    e.local_rank = std::max(0, env_int({kEnvLocalRank}));
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
  e.local_rank = std::max(0, env_int({"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                      "PMIX_LOCAL_RANK", "SLURM_LOCALID"}));
  return e;
}

namespace {
NcclHooks g_nccl{};
bool g_have_nccl = false;

std::unique_ptr<Communicator> make_mpi(const LaunchEnv& e) {
  auto c = std::make_unique<MpiCommunicator>();
  // The environment and MPI must agree, or the data sharding would silently overlap.
  TDA_CHECK(c->rank() == e.rank && c->world() == e.world,
            "MPI reports rank " + std::to_string(c->rank()) + " of " + std::to_string(c->world()) +
                " but the launcher's environment says rank " + std::to_string(e.rank) + " of " +
                std::to_string(e.world) + " (was tda built against the MPI that launched it?)");
  return c;
}
}  // namespace

void register_nccl(const NcclHooks& hooks) {
  g_nccl = hooks;
  g_have_nccl = true;
}

const NcclHooks* nccl_hooks() {
  return g_have_nccl ? &g_nccl : nullptr;
}

std::unique_ptr<Communicator> make_communicator(const std::string& device) {
  LaunchEnv e = launch_env();
  if (!e.launched) return std::make_unique<LocalCommunicator>();
  const bool self_gpu = !e.nccl_id.empty();
  if (device == "cpu" && !self_gpu) return make_mpi(e);
  const NcclHooks* nccl = nccl_hooks();
  TDA_CHECK(nccl, "train.device \"" + device +
                      "\" with several ranks needs NCCL, which this tda binary was built without");
  // Only the emulated stand-in can reduce host buffers; real NCCL needs the cuda backend.
  TDA_CHECK(device == "cuda" || nccl->host_memory,
            "--gpus needs train.device=cuda (got \"" + device + "\"); use --procs N for CPU ranks");
  return nccl->make(e, self_gpu ? nullptr : make_mpi(e));
}

}  // namespace tda
