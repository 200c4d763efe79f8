// How a rank starts (distributed/communicator.h): which environment variable gives its node-local
// rank under each launcher, and the order of start-up under mpirun/srun with GPUs: the GPU is bound
// from the launcher's local rank before MPI_Init (some MPI/UCX stacks bind to whatever device is
// current then), and MPI's own count of the ranks on the node must agree afterwards. MPI and
// NCCL are replaced by recorders, so no process is started.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "distributed/communicator.h"
#include "test_util.h"

using namespace tda;

namespace {
// Every variable launch_env() reads, unset for the scope; then the case's own.
struct LauncherEnv {
  std::vector<std::unique_ptr<ScopedEnv>> vars;
  explicit LauncherEnv(std::vector<std::pair<const char*, const char*>> set) {
    for (const char* v :
         {"TDA_NCCL_ID", "TDA_RANK", "TDA_WORLD_SIZE", "TDA_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE",
          "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_SIZE", "PMI_RANK", "PMIX_RANK",
          "PMIX_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_STEP_NUM_TASKS",
          "SLURM_PROCID", "SLURM_LOCALID", "LOCAL_RANK"})
      vars.push_back(std::make_unique<ScopedEnv>(v, nullptr));
    for (auto& [name, value] : set) vars.push_back(std::make_unique<ScopedEnv>(name, value));
  }
};

// A rank of an MPI job, as the recording MPI factory below creates it (no collectives run).
struct FakeMpi final : LocalCommunicator {
  int r, w;
  FakeMpi(int rank, int world) : r(rank), w(world) {}
  int rank() const override { return r; }
  int world() const override { return w; }
};

// Records the start-up calls in order: "bind <local rank>", "MPI_Init", "nccl <device>".
struct Recorder {
  std::vector<std::string> calls;
  int mpi_local_rank = 0;
  NcclHooks nccl;
  Recorder() {
    nccl.bind_device = [this](int local_rank) {
      calls.push_back("bind " + std::to_string(local_rank));
      return local_rank % 4;  // a node with 4 GPUs
    };
    nccl.make = [this](const LaunchEnv&, int device, const DistOptions&,
                       std::unique_ptr<Communicator> boot) {
      calls.push_back("nccl " + std::to_string(device));
      return boot;  // stands in for the NCCL communicator
    };
  }
  MpiFactory mpi(const LaunchEnv& e) {
    return [this, e](int* local_rank) -> std::unique_ptr<Communicator> {
      calls.push_back("MPI_Init");
      *local_rank = mpi_local_rank;
      return std::make_unique<FakeMpi>(e.rank, e.world);
    };
  }
};
}  // namespace

TEST_CASE("launch_env: the local rank comes from the launcher's own variable", "[dist]") {
  struct Case {
    std::vector<std::pair<const char*, const char*>> env;
    int local_rank;
    std::string var;
  };
  const std::vector<Case> cases = {
      // Open MPI inside an sbatch script: SLURM_LOCALID is the batch step's, 0 for every rank.
      {{{"OMPI_COMM_WORLD_SIZE", "8"},
        {"OMPI_COMM_WORLD_RANK", "5"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
        {"SLURM_LOCALID", "0"}},
       1,
       "OMPI_COMM_WORLD_LOCAL_RANK"},
      // MPICH / Intel MPI (hydra), also inside sbatch.
      {{{"PMI_SIZE", "4"}, {"PMI_RANK", "3"}, {"MPI_LOCALRANKID", "3"}, {"SLURM_LOCALID", "0"}},
       3,
       "MPI_LOCALRANKID"},
      // srun.
      {{{"SLURM_STEP_NUM_TASKS", "16"}, {"SLURM_PROCID", "9"}, {"SLURM_LOCALID", "1"}},
       1,
       "SLURM_LOCALID"},
      // MVAPICH2.
      {{{"PMI_SIZE", "2"}, {"PMI_RANK", "1"}, {"MV2_COMM_WORLD_LOCAL_RANK", "1"}},
       1,
       "MV2_COMM_WORLD_LOCAL_RANK"},
      // A wrapper that only sets LOCAL_RANK.
      {{{"PMI_SIZE", "2"}, {"PMI_RANK", "1"}, {"LOCAL_RANK", "1"}}, 1, "LOCAL_RANK"},
      // None: MPI's count decides after MPI_Init.
      {{{"PMI_SIZE", "2"}, {"PMI_RANK", "1"}}, 0, ""},
      // tda's own --gpus launcher.
      {{{"TDA_NCCL_ID", "00"}, {"TDA_RANK", "1"}, {"TDA_WORLD_SIZE", "2"}, {"TDA_LOCAL_RANK", "1"}},
       1,
       "TDA_LOCAL_RANK"},
  };
  for (const Case& c : cases) {
    LauncherEnv env(c.env);
    const LaunchEnv e = launch_env();
    INFO("expected " << c.var);
    CHECK(e.launched);
    CHECK(e.local_rank == c.local_rank);
    CHECK(e.local_rank_var == c.var);
  }
}

TEST_CASE("make_communicator: under mpirun the GPU is bound before MPI_Init", "[dist]") {
  LauncherEnv env({{"OMPI_COMM_WORLD_SIZE", "8"},
                   {"OMPI_COMM_WORLD_RANK", "6"},
                   {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}});
  const LaunchEnv e = launch_env();
  Recorder rec;
  rec.mpi_local_rank = 2;
  auto comm = make_communicator("cuda", DistOptions{}, e, rec.mpi(e), &rec.nccl);
  CHECK(rec.calls == std::vector<std::string>{"bind 2", "MPI_Init", "nccl 2"});
  CHECK(comm->rank() == 6);

  // MPI disagrees with the variable that chose the GPU: two ranks would share one.
  Recorder wrong;
  wrong.mpi_local_rank = 3;
  try {
    make_communicator("cuda", DistOptions{}, e, wrong.mpi(e), &wrong.nccl);
    FAIL("a local rank MPI contradicts was accepted");
  } catch (const Error& err) {
    CHECK(std::string(err.what()) ==
          "MPI counts this process as rank 3 on its node but OMPI_COMM_WORLD_LOCAL_RANK=2 chose "
          "its GPU: ranks would share GPUs; fix or unset OMPI_COMM_WORLD_LOCAL_RANK");
  }

  // device cpu: MPI only, no GPU.
  Recorder cpu;
  make_communicator("cpu", DistOptions{}, e, cpu.mpi(e), &cpu.nccl);
  CHECK(cpu.calls == std::vector<std::string>{"MPI_Init"});
}

TEST_CASE("make_communicator: without a local-rank variable MPI's count picks the GPU", "[dist]") {
  LauncherEnv env({{"PMI_SIZE", "4"}, {"PMI_RANK", "3"}});
  const LaunchEnv e = launch_env();
  Recorder rec;
  rec.mpi_local_rank = 1;
  make_communicator("cuda", DistOptions{}, e, rec.mpi(e), &rec.nccl);
  CHECK(rec.calls == std::vector<std::string>{"MPI_Init", "bind 1", "nccl 1"});
}

TEST_CASE("make_communicator: tda's --gpus workers bind their GPU and need no MPI", "[dist]") {
  LauncherEnv env(
      {{"TDA_NCCL_ID", "00"}, {"TDA_RANK", "1"}, {"TDA_WORLD_SIZE", "2"}, {"TDA_LOCAL_RANK", "1"}});
  Recorder rec;
  make_communicator("cuda", DistOptions{}, launch_env(), nullptr, &rec.nccl);
  CHECK(rec.calls == std::vector<std::string>{"bind 1", "nccl 1"});
}

TEST_CASE("make_communicator: a tda built without MPI says what an mpirun job needs", "[dist]") {
  LauncherEnv env({{"SLURM_STEP_NUM_TASKS", "16"}, {"SLURM_PROCID", "3"}, {"SLURM_LOCALID", "3"}});
  Recorder rec;
  try {
    make_communicator("cuda", DistOptions{}, launch_env(), nullptr, &rec.nccl);
    FAIL("an srun job of 16 ranks started without MPI");
  } catch (const Error& err) {
    const std::string what = err.what();
    CHECK(what.rfind("this tda was built without MPI, which a job started by mpirun/srun needs",
                     0) == 0);
    CHECK(what.find("`tda train --gpus N` needs no MPI") != std::string::npos);
  }
  // A job of one rank has nobody to meet: it runs alone.
  LauncherEnv one({{"SLURM_STEP_NUM_TASKS", "1"}, {"SLURM_PROCID", "0"}});
  CHECK(make_communicator("cuda", DistOptions{}, launch_env(), nullptr, &rec.nccl)->world() == 1);
}
