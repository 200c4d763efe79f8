#include "sweep/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "distributed/launch.h"

namespace tda {

void ChildProcess::start(const std::vector<std::string>& args, const std::vector<std::string>& env,
                         const std::string& log) {
  const std::string exe = self_exe();
  log_ = log;
  struct stat st {};
  log_start_ = ::stat(log.c_str(), &st) == 0 ? long(st.st_size) : 0;
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  TDA_CHECK(fd >= 0, "sweep: cannot open log " + log);
  const pid_t parent = ::getpid();
  std::vector<std::string> all = {exe};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_ = ::fork();
  TDA_CHECK(pid_ >= 0, "sweep: fork failed");
  if (pid_ == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(143);  // the sweep died before prctl took effect
    const int in = ::open("/dev/null", O_RDONLY);
    ::dup2(in, 0);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::execv(exe.c_str(), argv.data());
    ::_exit(127);
  }
  ::setpgid(pid_, pid_);  // also from the parent: no window where a signal misses the group
  ::close(fd);
  done_ = false;
}

bool ChildProcess::poll() {
  if (pid_ <= 0 || done_) return done_;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r != pid_) return false;
  done_ = true;
  code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return true;
}

void ChildProcess::signal_group(int sig) const {
  if (running()) ::kill(-pid_, sig);
}

std::string ChildProcess::output() const {
  std::ifstream f(log_, std::ios::binary);
  f.seekg(log_start_);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string ChildProcess::error_line() const {
  std::istringstream in(output());
  std::string line, last, err;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    last = line;
    if (line.rfind("error:", 0) == 0) err = line;
  }
  std::string r = err.empty() ? last : err;
  if (r.empty()) r = "exit code " + std::to_string(code_) + ", no output";
  return r.size() > 400 ? r.substr(0, 400) + "..." : r;
}

std::string quote_command(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) {
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLM"
                                         "NOPQRSTUVWXYZ0123456789_-./=:,+@%") == std::string::npos;
    std::string q = "'";
    for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    s += (s.empty() ? "" : " ") + (plain ? a : q + "'");
  }
  return s;
}

}  // namespace tda
