// `tda train --procs N`: the launching process re-executes the tda binary as N MPI ranks under
// the system mpirun (no torchrun, no user-typed mpirun) and supervises them:
//  - SIGINT/SIGTERM are forwarded to the workers themselves (they agree to checkpoint and stop);
//    mpirun runs in its own process group so a terminal's Ctrl-C reaches only the launcher;
//  - if any worker dies or fails, mpirun stops the others and the launcher reports one line
//    naming the rank.
// Workers find each other through the files in `worker_dir`: rank_<r>.pid at start and
// rank_<r>.exit (exit code, then the error message) at the end.
#pragma once
#include <string>
#include <vector>

namespace tda {

struct LaunchOptions {
  int procs = 1;
  std::string worker_dir;         // created empty, removed when the run ends
  std::vector<std::string> args;  // arguments after `tda train`, without --procs
};

// Runs the job to completion; returns 0, or throws tda::Error with a one-line reason.
int launch_workers(const LaunchOptions& opt);

// `tda train --gpus N` (gpu_launch.cpp): forks N workers of this binary directly, no mpirun.
// The launcher makes the NCCL unique id and passes it with the rank in the environment
// (TDA_NCCL_ID, TDA_RANK, TDA_WORLD_SIZE, TDA_LOCAL_RANK; distributed/communicator.h), gives worker
// r the r-th GPU of CUDA_VISIBLE_DEVICES (or GPU r), forwards SIGINT/SIGTERM once (a second one
// kills the workers), and when a worker dies or fails kills the others and throws one line.
// Same contract as launch_workers otherwise (worker_dir, return value).
int launch_gpu_workers(const LaunchOptions& opt);

// Worker side. When this process was started by launch_workers (TDA_WORKER_DIR is set), records
// its pid and, via finish(), its exit code and error message; otherwise does nothing.
class WorkerRecord {
 public:
  explicit WorkerRecord(int rank);
  void finish(int code, const std::string& error = "");
  static bool active();  // started by launch_workers?

 private:
  std::string dir_;
  int rank_;
};

// This binary (/proc/self/exe): what the launchers and `tda sweep` start as children.
std::string self_exe();

}  // namespace tda
