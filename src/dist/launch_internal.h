// Pieces shared by the two self-launchers in dist/ (launch.cpp: CPU ranks under mpirun;
// gpu_launch.cpp: GPU workers forked directly). Not part of the public interface.
#pragma once
#include <string>
#include <vector>

namespace tda {

constexpr const char* kWorkerDirEnv = "TDA_WORKER_DIR";

// The one-line reason a job of `procs` workers failed, from their exit records in `dir`
// (WorkerRecord), the rank that vanished first (-1: none) and the workers' pids (0: unknown).
// Empty when every worker recorded exit code 0.
std::string worker_failure(const std::string& dir, int procs, int first_gone,
                           const std::vector<int>& pids);

// OMP_NUM_THREADS / OPENBLAS_NUM_THREADS = cores / procs, unless the user set them.
void split_cores_between(int procs);

std::string self_exe();  // this binary, from /proc/self/exe

}  // namespace tda
