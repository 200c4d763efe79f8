// Child `tda` processes of a sweep. Each child runs in its own process group (the sweep forwards
// an interrupt to it once, and reaches `--gpus N` workers too), appends its stdout and stderr to
// a log file, and receives SIGTERM if the sweep dies (PR_SET_PDEATHSIG): a training run then
// checkpoints and exits, so a killed sweep leaves no orphan training on and can be resumed.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace tda {

class ChildProcess {
 public:
  ChildProcess() = default;
  // Starts `self_exe() args...` with `env` ("K=V") added, output appended to `log`.
  void start(const std::vector<std::string>& args, const std::vector<std::string>& env,
             const std::string& log);
  bool running() const { return pid_ > 0 && !done_; }
  // Non-blocking: true once the child has exited (then exit_code() / signaled() are valid).
  bool poll();
  int exit_code() const { return code_; }  // 128 + signal when killed by one
  void signal_group(int sig) const;        // to the child's whole process group
  // The log's text written since start() (what this child printed).
  std::string output() const;
  // The child's last line starting with "error:" (else its last non-empty line), for status.
  std::string error_line() const;

 private:
  pid_t pid_ = -1;
  bool done_ = false;
  int code_ = 0;
  std::string log_;
  long log_start_ = 0;
};

// Shell-style quoting of a command line, for logs and --dry-run.
std::string quote_command(const std::vector<std::string>& args);

}  // namespace tda
