// `tda train --gpus N` on one node: the launcher forks N copies of this binary (one per GPU),
// without mpirun or torchrun, and supervises them. See launch.h for the contract.
//
// Why no MPI here: the workers only need NCCL's unique id to meet, and the launcher can make it
// (ncclGetUniqueId) and hand it over in the environment. Under mpirun/srun the id goes over MPI
// instead (distributed/communicator.cpp).
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "core/error.h"
#include "core/fs.h"
#include "distributed/communicator.h"
#include "distributed/launch.h"
#include "distributed/launch_internal.h"

namespace tda {

namespace {
// GPU ids for the workers: the launcher's own CUDA_VISIBLE_DEVICES list (so that
// `CUDA_VISIBLE_DEVICES=4,5,6,7 tda train --gpus 4` uses those four), else 0..N-1.
std::vector<std::string> worker_gpus(int n) {
  std::vector<std::string> ids;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"); v && *v) {
    std::stringstream ss(v);
    std::string id;
    while (std::getline(ss, id, ','))
      if (!id.empty()) ids.push_back(id);
    TDA_CHECK(int(ids.size()) >= n, "--gpus " + std::to_string(n) + " but CUDA_VISIBLE_DEVICES=" +
                                        v + " names only " + std::to_string(ids.size()));
    ids.resize(size_t(n));
  } else {
    for (int r = 0; r < n; ++r) ids.push_back(std::to_string(r));
  }
  return ids;
}

// What a worker's exit status says, for the error line when it left no record of its own.
std::string describe_exit(int st) {
  if (WIFSIGNALED(st)) return "died (killed or crashed)";
  return "exited with code " + std::to_string(WEXITSTATUS(st)) + " without a message";
}
}  // namespace

int launch_gpu_workers(const LaunchOptions& opt) {
  const NcclHooks* nccl = nccl_hooks();
  TDA_CHECK(nccl, "--gpus needs NCCL, which this tda binary was built without");
  const int n = opt.procs;
  const std::vector<std::string> gpus = worker_gpus(n);
  remove_tree(opt.worker_dir);
  make_dirs(opt.worker_dir);
  split_cores_between(n);
  const std::string id = nccl->new_unique_id_hex();
  const std::string exe = self_exe();
  std::vector<std::string> args = {exe, "train"};
  for (const auto& a : opt.args) args.push_back(a);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  LauncherSignals signals;

  // The workers share one process group of their own (led by worker 0): a terminal's Ctrl-C
  // reaches only the launcher, which decides what the workers get.
  std::vector<int> pids(size_t(n), 0);
  pid_t group = 0;
  const pid_t launcher = ::getpid();
  for (int r = 0; r < n; ++r) {
    pid_t pid = ::fork();
    if (pid < 0) {
      const std::string why = std::strerror(errno);
      for (int q = 0; q < r; ++q) ::kill(pids[size_t(q)], SIGKILL);
      for (int q = 0; q < r; ++q) ::waitpid(pids[size_t(q)], nullptr, 0);
      throw Error("fork failed: " + why);
    }
    if (pid == 0) {
      ::setpgid(0, group);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the launcher
      if (::getppid() != launcher) ::_exit(1);
      signals.restore();
      ::setenv(kEnvNcclId, id.c_str(), 1);
      ::setenv(kEnvRank, std::to_string(r).c_str(), 1);
      ::setenv(kEnvWorld, std::to_string(n).c_str(), 1);
      ::setenv(kEnvLocalRank, std::to_string(r).c_str(), 1);
      ::setenv("CUDA_VISIBLE_DEVICES", gpus[size_t(r)].c_str(), 1);
      ::setenv(kWorkerDirEnv, opt.worker_dir.c_str(), 1);
      ::execv(argv[0], argv.data());
      std::fprintf(stderr, "error: cannot run %s: %s\n", argv[0], std::strerror(errno));
      ::_exit(127);
    }
    if (group == 0) group = pid;
    ::setpgid(pid, group);  // also here: no race with a signal before the child's own call
    pids[size_t(r)] = pid;
  }

  // Reap workers as they exit. The first to fail (non-zero exit or killed) is the cause; the
  // others are then killed at once (they would wait for it in the next collective; SIGKILL is
  // safe for checkpoints, which are written to a temp directory and renamed).
  int alive = n, first_gone = -1, handled = 0;
  std::vector<int> status(size_t(n), 0);
  std::vector<bool> reaped(size_t(n), false), killed(size_t(n), false);
  bool killed_all = false;
  auto kill_all = [&] {
    if (killed_all) return;
    killed_all = true;
    for (int r = 0; r < n; ++r)
      if (pids[size_t(r)] > 0 && !reaped[size_t(r)]) {
        ::kill(pids[size_t(r)], SIGKILL);
        killed[size_t(r)] = true;
      }
  };
  while (alive > 0) {
    while (handled < LauncherSignals::count()) {
      // First signal: the workers checkpoint at the end of the step and stop together.
      // A second one: stop now.
      if (++handled == 1)
        for (int r = 0; r < n; ++r) ::kill(pids[size_t(r)], LauncherSignals::last());
      else
        kill_all();
    }
    int st = 0;
    pid_t w = ::waitpid(-1, &st, WNOHANG);
    if (w == 0 || (w < 0 && errno == EINTR)) {
      ::usleep(20000);
      continue;
    }
    TDA_CHECK(w > 0, std::string("waitpid failed: ") + std::strerror(errno));
    int r = 0;
    while (r < n && pids[size_t(r)] != w) ++r;
    if (r == n) continue;  // not one of ours
    status[size_t(r)] = st;
    reaped[size_t(r)] = true;
    --alive;
    const bool failed = !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    if (failed && first_gone < 0 && !killed_all) {
      first_gone = r;
      kill_all();
    }
  }
  signals.restore();

  std::string why;
  if (LauncherSignals::count() > 1 && first_gone < 0 && killed_all)
    why = "interrupted twice: workers stopped without a final checkpoint";
  if (why.empty() && first_gone >= 0) {
    // Prefer what the failed worker itself wrote; a worker killed from outside writes nothing.
    // Those we killed are not suspects: a rank that timed out waiting for a hung one is the news.
    why = worker_failure(opt.worker_dir, n, first_gone, pids, &killed);
    const std::string prefix = "worker rank " + std::to_string(first_gone);
    if (why.rfind(prefix, 0) == 0)
      why = prefix + " (pid " + std::to_string(pids[size_t(first_gone)]) + ") " +
            describe_exit(status[size_t(first_gone)]);
  }
  if (why.empty() && killed_all)
    why = "interrupted twice: workers stopped without a final checkpoint";
  remove_tree(opt.worker_dir);
  if (why.empty()) return 0;
  throw Error(why + "; all " + std::to_string(n) + " workers were stopped");
}

}  // namespace tda
