// Helpers for tests of runs as users see them: child `tda` processes with a deadline, an
// environment and a signal (for hangs, interrupts and kills: a popen'd command cannot be
// signalled or timed out), and a byte-level corpus that keeps such runs small.
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/fs.h"
#include "data/shard.h"
#include "test_util.h"

namespace tda {

// The bundled Tiny Shakespeare text as byte tokens (ids < 256) in dir/train.bin and dir/val.bin,
// so a run can use a 256-entry vocabulary: checkpoints of the tiny model shrink from 150 MB to
// about 2 MB. Returns the --set flags that point a tiny config at them.
inline std::vector<std::string> byte_corpus(const std::string& dir, size_t train_bytes = 200000) {
  const std::vector<char> text = read_file_bytes(source_dir() + "/data/tinyshakespeare/input.txt");
  std::vector<uint16_t> toks(text.begin(), text.end());
  for (auto& t : toks) t = uint16_t(t & 0xff);
  const size_t n = std::min(train_bytes, toks.size() / 2);
  write_shard(dir + "/train.bin", toks.data(), n);
  write_shard(dir + "/val.bin", toks.data() + n, 20000);
  return {"--set", "model.vocab_size=256",
          "--set", "model.real_vocab_size=256",
          "--set", "data.train=" + dir + "/train.bin",
          "--set", "data.val=" + dir + "/val.bin"};
}

struct TdaProcess {
  pid_t pid = -1;
  std::string log;  // stdout + stderr
  int status = 0;
  bool done = false;

  // Starts TDA_BINARY with `args`; `env` entries ("K=V") are added to the environment.
  TdaProcess(const std::vector<std::string>& args, const std::string& log_path,
             const std::vector<std::string>& env = {})
      : log(log_path) {
    ::unlink(log_path.c_str());  // wait_for_log must not see an earlier process's output
    pid = ::fork();
    if (pid == 0) {
      int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
      std::vector<char*> argv = {const_cast<char*>(TDA_BINARY)};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(TDA_BINARY, argv.data());
      ::_exit(127);
    }
  }
  ~TdaProcess() {
    if (!done) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
    }
  }
  bool poll() {
    if (!done && ::waitpid(pid, &status, WNOHANG) == pid) done = true;
    return done;
  }
  // Waits up to `seconds`; false (and the process still running) on timeout.
  bool wait_for(double seconds) {
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!poll()) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }
  // Waits up to `seconds` for `needle` to appear in the log.
  bool wait_for_log(const std::string& needle, double seconds) {
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (output().find(needle) == std::string::npos) {
      if (poll() || std::chrono::steady_clock::now() > end)
        return output().find(needle) != std::string::npos;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }
  void kill_now(int sig = SIGKILL) { ::kill(pid, sig); }
  bool exited_with(int code) const {
    return done && WIFEXITED(status) && WEXITSTATUS(status) == code;
  }
  bool killed() const { return done && WIFSIGNALED(status); }
  std::string output() const {
    std::ifstream f(log);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
};

// A training run of configs/tiny/<kind>.json on byte_corpus data in a temporary directory, as
// a user starts it: train() runs `tda train ... --out run` and returns its exit code, the log in
// `out`; args() is the same command for a TdaProcess.
struct SmallRun {
  TempDir d;
  std::vector<std::string> data = byte_corpus(d.path);
  std::string run = d.path + "/run", out;
  std::vector<std::string> args(const std::string& kind,
                                const std::vector<std::string>& extra) const {
    std::vector<std::string> a = {
        "train", "--config",         source_dir() + "/configs/tiny/" + kind + ".json", "--out", run,
        "--set", "train.val_every=0"};
    a.insert(a.end(), data.begin(), data.end());
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  int train(const std::string& kind, const std::vector<std::string>& extra) {
    TdaProcess p(args(kind, extra), d.path + "/log.txt");
    if (!p.wait_for(120)) return -2;
    out = p.output();
    return WIFEXITED(p.status) ? WEXITSTATUS(p.status) : -1;
  }
};

}  // namespace tda
