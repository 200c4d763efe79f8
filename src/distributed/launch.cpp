#include "distributed/launch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "core/fs.h"
#include "distributed/launch_internal.h"

namespace tda {

namespace {

volatile sig_atomic_t g_signal = 0;
volatile sig_atomic_t g_signal_count = 0;
extern "C" void on_launcher_signal(int sig) {
  g_signal = sig;
  g_signal_count = g_signal_count + 1;
}

std::string find_mpirun() {
  if (const char* e = std::getenv("TDA_MPIRUN"); e && *e) return e;
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  std::string d;
  while (std::getline(ss, d, ':'))
    if (!d.empty() && ::access((d + "/mpirun").c_str(), X_OK) == 0) return d + "/mpirun";
  throw Error("--procs needs mpirun on PATH (Debian/Ubuntu: apt-get install openmpi-bin)");
}

std::vector<std::string> split_words(const char* s) {
  std::vector<std::string> r;
  std::stringstream ss(s ? s : "");
  std::string w;
  while (ss >> w) r.push_back(w);
  return r;
}

void set_default_env(const char* name, const std::string& value) {
  if (!std::getenv(name)) ::setenv(name, value.c_str(), 0);
}

int read_pid(const std::string& dir, int rank) {
  std::ifstream f(dir + "/rank_" + std::to_string(rank) + ".pid");
  int pid = 0;
  return (f >> pid) ? pid : 0;
}

// Exit record of a rank: false if it never wrote one (it was killed or crashed).
bool read_exit(const std::string& dir, int rank, int* code, std::string* msg) {
  std::ifstream f(dir + "/rank_" + std::to_string(rank) + ".exit");
  if (!(f >> *code)) return false;
  f.get();
  std::getline(f, *msg);
  return true;
}

void forward_signal(const LaunchOptions& opt, pid_t mpirun, int sig, int count) {
  int sent = 0;
  if (count == 1) {  // first signal: the workers checkpoint and stop together
    for (int r = 0; r < opt.procs; ++r)
      if (int pid = read_pid(opt.worker_dir, r); pid > 0 && ::kill(pid, sig) == 0) ++sent;
  }
  // Before the workers are up, or on a repeated signal: mpirun tears the job down.
  if (sent == 0) ::kill(-mpirun, SIGTERM);
}

std::string describe_status(int st) {
  if (WIFSIGNALED(st)) return "mpirun was killed by signal " + std::to_string(WTERMSIG(st));
  return "mpirun exit code " + std::to_string(WEXITSTATUS(st));
}
}  // namespace

// The reason a job failed, most specific first: a rank's own error (not a communication
// failure, which only echoes another rank's death), then the first worker that vanished without
// a word, then any other non-zero exit. Empty if every worker recorded success.
std::string worker_failure(const std::string& dir, int procs, int first_gone,
                           const std::vector<int>& pids, const std::vector<bool>* killed) {
  std::vector<int> codes(size_t(procs), 0);
  std::vector<std::string> msgs{size_t(procs)};
  std::vector<bool> recorded(size_t(procs), false);
  for (int r = 0; r < procs; ++r)
    recorded[size_t(r)] = read_exit(dir, r, &codes[size_t(r)], &msgs[size_t(r)]);
  auto is_comm_failure = [](const std::string& m) {
    return m.rfind("MPI_", 0) == 0 || m.rfind("nccl", 0) == 0;
  };
  std::string why;
  for (int r = 0; r < procs && why.empty(); ++r)
    if (recorded[size_t(r)] && codes[size_t(r)] != 0 && !is_comm_failure(msgs[size_t(r)]))
      why = "rank " + std::to_string(r) + ": " +
            (msgs[size_t(r)].empty() ? "exit code " + std::to_string(codes[size_t(r)])
                                     : msgs[size_t(r)]);
  std::vector<int> order;
  if (first_gone >= 0) order.push_back(first_gone);
  for (int r = 0; r < procs; ++r) order.push_back(r);
  for (int r : order) {
    if (!why.empty()) break;
    if (recorded[size_t(r)] || (killed && (*killed)[size_t(r)])) continue;
    why = "worker rank " + std::to_string(r) +
          (pids[size_t(r)] > 0
               ? " (pid " + std::to_string(pids[size_t(r)]) + ") died (killed or crashed)"
               : " did not start");
  }
  for (int r = 0; r < procs && why.empty(); ++r)
    if (codes[size_t(r)] != 0) why = "rank " + std::to_string(r) + ": " + msgs[size_t(r)];
  return why;
}

void split_cores_between(int procs) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::string threads = std::to_string(std::max(1u, cores / unsigned(procs)));
  set_default_env("OMP_NUM_THREADS", threads);
  set_default_env("OPENBLAS_NUM_THREADS", threads);
}

std::string self_exe() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  TDA_CHECK(n > 0, "cannot find the tda binary (/proc/self/exe)");
  return std::string(buf, size_t(n));
}

int launch_workers(const LaunchOptions& opt) {
#if !defined(TDA_WITH_MPI)
  throw Error(
      "--procs runs CPU ranks under mpirun, and this tda was built without MPI: rebuild "
      "where MPI's development files are installed (Debian: libopenmpi-dev)");
#endif
  const std::string mpirun = find_mpirun();
  remove_tree(opt.worker_dir);
  make_dirs(opt.worker_dir);
  // One BLAS/OpenMP thread pool per rank, splitting the cores, unless the user chose.
  split_cores_between(opt.procs);
  ::setenv(kWorkerDirEnv, opt.worker_dir.c_str(), 1);
  // The ranks' output reaches the user through mpirun: colour only if it lands on a terminal.
  set_default_env("TDA_COLOR", ::isatty(1) && ::isatty(2) ? "1" : "0");

  // -q: mpirun's multi-line banners are replaced by our one-line report. --bind-to none: the
  // ranks' thread pools share the cores instead of being pinned to one each. --stdin none:
  // mpirun runs in a background process group and must not read the terminal.
  std::vector<std::string> args = {mpirun,
                                   "-q",
                                   "-np",
                                   std::to_string(opt.procs),
                                   "--oversubscribe",
                                   "--bind-to",
                                   "none",
                                   "--stdin",
                                   "none",
                                   "-x",
                                   "OMP_NUM_THREADS",
                                   "-x",
                                   "OPENBLAS_NUM_THREADS",
                                   "-x",
                                   kWorkerDirEnv,
                                   "-x",
                                   "TDA_COLOR"};
  if (::geteuid() == 0) args.push_back("--allow-run-as-root");
  for (auto& w : split_words(std::getenv("TDA_MPIRUN_ARGS"))) args.push_back(w);  // e.g. --mca
  args.push_back(self_exe());
  args.push_back("train");
  for (const auto& a : opt.args) args.push_back(a);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  LauncherSignals signals;

  pid_t child = ::fork();
  TDA_CHECK(child >= 0, std::string("fork failed: ") + std::strerror(errno));
  if (child == 0) {
    ::setpgid(0, 0);                     // a terminal's Ctrl-C goes to the launcher only
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlive the launcher
    signals.restore();
    ::execv(argv[0], argv.data());
    std::fprintf(stderr, "error: cannot run %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(child, child);  // also here: no race with a signal arriving before the child's call
  // Poll rather than block: besides forwarding signals, note the order in which workers vanish.
  // When one dies, mpirun kills the others, so the first to vanish is the cause.
  std::vector<int> pids(size_t(opt.procs), 0);
  std::vector<bool> gone(size_t(opt.procs), false);
  int first_gone = -1, st = 0, handled = 0;
  for (;;) {
    pid_t w = ::waitpid(child, &st, WNOHANG);
    TDA_CHECK(w >= 0 || errno == EINTR, std::string("waitpid failed: ") + std::strerror(errno));
    if (w == child) break;
    while (handled < LauncherSignals::count())
      forward_signal(opt, child, LauncherSignals::last(), ++handled);
    for (int r = 0; r < opt.procs; ++r) {
      if (pids[size_t(r)] == 0) pids[size_t(r)] = read_pid(opt.worker_dir, r);
      if (pids[size_t(r)] > 0 && !gone[size_t(r)] && ::kill(pids[size_t(r)], 0) != 0) {
        gone[size_t(r)] = true;
        if (first_gone < 0) first_gone = r;
      }
    }
    ::usleep(20000);
  }
  signals.restore();

  std::string why;
  if (LauncherSignals::count() > 1 && st != 0)
    why = "interrupted twice: workers stopped without a final checkpoint";
  if (why.empty()) why = worker_failure(opt.worker_dir, opt.procs, first_gone, pids);
  remove_tree(opt.worker_dir);
  if (why.empty() && st == 0) return 0;
  if (why.empty()) why = describe_status(st);
  throw Error(why + "; all " + std::to_string(opt.procs) + " workers were stopped");
}

LauncherSignals::LauncherSignals() {
  struct sigaction sa {};
  sa.sa_handler = on_launcher_signal;  // no SA_RESTART
  sigemptyset(&sa.sa_mask);
  g_signal = 0;
  g_signal_count = 0;
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
  // A closed terminal: forwarded, so the workers checkpoint; left ignored under nohup.
  sigaction(SIGHUP, &sa, &old_hup_);
  if (old_hup_.sa_handler == SIG_IGN) sigaction(SIGHUP, &old_hup_, nullptr);
}
void LauncherSignals::restore() const {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGHUP, &old_hup_, nullptr);
}
int LauncherSignals::count() {
  return g_signal_count;
}
int LauncherSignals::last() {
  return g_signal;
}

bool WorkerRecord::active() {
  const char* d = std::getenv(kWorkerDirEnv);
  return d && *d;
}

WorkerRecord::WorkerRecord(int rank) : rank_(rank) {
  if (!active()) return;
  dir_ = std::getenv(kWorkerDirEnv);
  write_file_durable(dir_ + "/rank_" + std::to_string(rank_) + ".pid", std::to_string(::getpid()));
}

void WorkerRecord::finish(int code, const std::string& error) {
  if (dir_.empty()) return;
  std::string line = error;
  for (char& c : line)
    if (c == '\n') c = ' ';
  write_file_durable(dir_ + "/rank_" + std::to_string(rank_) + ".exit",
                     std::to_string(code) + "\n" + line + "\n");
}

}  // namespace tda
