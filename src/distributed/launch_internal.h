// Pieces shared by the two self-launchers in distributed/ (launch.cpp: CPU ranks under mpirun;
// gpu_launch.cpp: GPU workers forked directly). Not part of the public interface.
#pragma once
#include <signal.h>

#include <string>
#include <vector>

namespace tda {

constexpr const char* kWorkerDirEnv = "TDA_WORKER_DIR";

// The one-line reason a job of `procs` workers failed, from their exit records in `dir`
// (WorkerRecord), the rank that vanished first (-1: none) and the workers' pids (0: unknown).
// `killed` (may be null) marks ranks the launcher itself killed: not suspects for having died.
// Empty when every worker recorded exit code 0.
std::string worker_failure(const std::string& dir, int procs, int first_gone,
                           const std::vector<int>& pids, const std::vector<bool>* killed = nullptr);

// OMP_NUM_THREADS / OPENBLAS_NUM_THREADS = cores / procs, unless the user set them.
void split_cores_between(int procs);

// SIGINT / SIGTERM / SIGHUP caught while a launcher waits for its workers (no SA_RESTART, so
// waitpid and usleep return early and the launcher can forward them). The previous handlers come
// back when this goes out of scope, or in a forked child by restore().
class LauncherSignals {
 public:
  LauncherSignals();
  ~LauncherSignals() { restore(); }
  LauncherSignals(const LauncherSignals&) = delete;
  LauncherSignals& operator=(const LauncherSignals&) = delete;
  void restore() const;
  static int count();  // signals caught since construction
  static int last();   // the latest one
 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  struct sigaction old_hup_ {};
};

}  // namespace tda
