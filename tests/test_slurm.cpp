// scripts/slurm/*.sbatch run without Slurm (tests/slurm/fake_slurm_cycle.sh: SLURM_* set, a
// fake srun/mpirun that exec their command, a fake scontrol): the time-limit SIGTERM to the
// batch shell is forwarded, the run checkpoints, the job requeues itself and the requeued job
// resumes to the last step with every step logged once; a preemption is not forwarded twice;
// a sweep's job array trains its runs where `tda sweep` finds them.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/fs.h"
#include "test_util.h"

using namespace tda;

// [mpi]: its srun and mpirun scripts start Open MPI ranks, which the ASan job leaves out as it
// does every MPI test: under the ASan runtime an Open MPI rank aborted (exit 134) in CI.
TEST_CASE("slurm: sbatch scripts checkpoint on TERM, requeue and resume (fake Slurm)",
          "[slurm][training][mpi]") {
  TempDir d;
  std::string log;
  const int rc = run_command(
      "bash " + source_dir() + "/tests/slurm/fake_slurm_cycle.sh " + TDA_BINARY + " " + d.path,
      &log);
  INFO(log);
  REQUIRE(rc == 0);
  CHECK(log.find("PASS") != std::string::npos);
  // Independently of the script's own checks: the requeued one-node run logged steps 1..12
  // once each, and the requeue named the job.
  const std::vector<char> b = read_file_bytes(d.path + "/node/metrics.jsonl");
  const std::string text(b.begin(), b.end());
  std::vector<int> steps;
  int resumes = 0;
  for (size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) {
    const auto r = nlohmann::json::parse(text.substr(at, nl - at));
    if (r["type"] == "train") steps.push_back(r["step"].get<int>());
    resumes += r["type"] == "resume";
  }
  std::vector<int> want;
  for (int s = 1; s <= 12; ++s) want.push_back(s);
  CHECK(steps == want);
  CHECK(resumes == 1);
}
