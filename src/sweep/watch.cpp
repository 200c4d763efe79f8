#include "sweep/watch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/file_lock.h"
#include "core/fs.h"
#include "distributed/launch.h"
#include "sweep/status.h"

namespace tda {

using json = nlohmann::json;

namespace {

json read_json_or_null(const std::string& path) {
  std::ifstream f(path);
  if (!f) return nullptr;
  std::stringstream ss;
  ss << f.rdbuf();
  return json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
}

int read_pid(const std::string& dir) {
  std::ifstream f(dir + "/sweep.pid");
  int pid = 0;
  return f >> pid ? pid : 0;
}

// A pid that is alive and a `tda sweep` (not a process that reused the number).
bool is_sweep_process(int pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string cmd = ss.str();
  std::replace(cmd.begin(), cmd.end(), '\0', ' ');
  return cmd.find(" sweep ") != std::string::npos;
}

}  // namespace

bool sweep_alive(const std::string& dir, int* pid_out) {
  const int pid = read_pid(dir);
  if (pid_out) *pid_out = pid;
  return is_sweep_process(pid) && FileLock::held_elsewhere(dir + "/.lock");
}

int detach_sweep(const std::string& dir, const std::vector<std::string>& args) {
  make_dirs(dir);
  int running = 0;
  TDA_CHECK(!sweep_alive(dir, &running), "sweep: a sweep already runs in " + dir + " (pid " +
                                             std::to_string(running) + "): `tda sweep status " +
                                             dir + "` shows it");
  const std::string log = dir + "/sweep.out", exe = self_exe();
  std::vector<std::string> all = {exe};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  TDA_CHECK(out >= 0, "sweep: cannot open " + log);
  int pipefd[2];
  TDA_CHECK(::pipe(pipefd) == 0, "sweep --detach: pipe failed");
  const pid_t first = ::fork();
  TDA_CHECK(first >= 0, "sweep --detach: fork failed");
  if (first == 0) {
    ::close(pipefd[0]);
    ::setsid();  // no controlling terminal: nothing sends SIGHUP when the terminal goes
    const pid_t daemon = ::fork();
    if (daemon != 0) {  // the session leader leaves; its child can never get a terminal back
      const int pid = int(daemon);
      ssize_t w = ::write(pipefd[1], &pid, sizeof pid);
      (void)w;
      ::_exit(daemon > 0 ? 0 : 1);
    }
    ::close(pipefd[1]);
    const int in = ::open("/dev/null", O_RDONLY);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    ::signal(SIGHUP, SIG_IGN);
    ::execv(exe.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(pipefd[1]);
  ::close(out);
  int pid = 0;
  const ssize_t n = ::read(pipefd[0], &pid, sizeof pid);
  ::close(pipefd[0]);
  int st = 0;
  ::waitpid(first, &st, 0);
  TDA_CHECK(n == sizeof pid && pid > 0, "sweep --detach: the detached sweep did not start");
  std::ofstream(log, std::ios::app) << "tda sweep --detach: started (pid " << pid << ") at "
                                    << std::time(nullptr) << " (unix time)\n";
  return pid;
}

std::string sweep_status_text(const std::string& dir) {
  const json sj = read_json_or_null(dir + "/sweep.json");
  TDA_CHECK(sj.is_object() && sj.contains("runs"),
            "sweep status: no sweep in " + dir + " (no readable sweep.json)");
  json st = read_json_or_null(dir + "/status.json");
  if (!st.is_object() || !st.contains("runs") || !st["runs"].is_object())
    st = {{"runs", json::object()}};
  int pid = 0;
  const bool alive = sweep_alive(dir, &pid);
  const bool children = !alive && FileLock::held_elsewhere(dir + "/.lock");

  std::ostringstream o;
  std::ostringstream lines;
  int done = 0, running = 0, failed = 0, pending = 0, stopped = 0;
  size_t width = 0;
  for (const auto& r : sj["runs"]) width = std::max(width, r.value("name", "").size());
  for (const auto& r : sj["runs"]) {
    const std::string name = r.value("name", "");
    const json rs = st["runs"].value(name, json::object());
    const std::string state = rs.value("state", "pending");
    const int max_steps = r.value("max_steps", rs.value("max_steps", 0));
    // Named, not a temporary: items() refers to the object it iterates.
    const json evals = rs.value("evals", json::object());
    std::string what;
    if (state == "done") {
      ++done;
      int n_done = 0, n_skipped = 0, n_failed = 0;
      for (const auto& [e, s] : evals.items()) {
        n_done += s == "done";
        n_skipped += s == "skipped";
        n_failed += s == "failed";
      }
      what = "done (" + std::to_string(max_steps) +
             " steps; evaluations: " + std::to_string(n_done) + " done" +
             (n_skipped ? ", " + std::to_string(n_skipped) + " skipped" : "") +
             (n_failed ? ", " + std::to_string(n_failed) + " FAILED" : "") + ")";
    } else if (state == "failed" || state == "blocked") {
      ++failed;
      what = state + ": " + rs.value("error", "");
    } else if (state == "training" || state == "evaluating" || state == "interrupted") {
      const TrainProgress p =
          last_train_record(r.value("dir", dir + "/" + name) + "/metrics.jsonl");
      const int step = std::max(p.step, rs.value("step", 0));
      if (state == "evaluating") {
        std::string evs;
        for (const auto& [e, s] : evals.items())
          if (s == "running") evs += (evs.empty() ? "" : ", ") + e;
        what = "evaluating" + (evs.empty() ? "" : " (" + evs + ")");
      } else {
        what = "step " + std::to_string(step) + "/" + std::to_string(max_steps);
        if (p.ms > 0 && step < max_steps) {
          char b[64];
          std::snprintf(b, sizeof b, ", %.2f s/step, ETA ", p.ms / 1000.0);
          what += b + fmt_seconds(p.ms / 1000.0 * (max_steps - step));
        }
      }
      if (alive && state != "interrupted") {
        ++running;
        what = "running: " + what;
      } else {
        ++stopped;
        what = "stopped (" + state + ") at " + what;
      }
    } else {
      ++pending;
      what = "pending";
    }
    std::string padded = name;
    padded.resize(width, ' ');
    lines << "  " << padded << "  " << what << "\n";
  }
  o << "sweep " << sj.value("name", "") << " in " << dir << ": " << done << " done, " << running
    << " running, " << failed << " failed, " << pending << " pending"
    << (stopped ? ", " + std::to_string(stopped) + " stopped" : "");
  if (st.contains("updated") && st["updated"].is_number()) {
    const long ago = long(std::time(nullptr)) - st["updated"].get<long>();
    o << " (status.json written " << fmt_seconds(double(std::max(0L, ago))) << " ago)";
  }
  o << "\n";
  if (alive)
    o << "sweep process: running (pid " << pid << "; log " << dir << "/sweep.out or sweep.log)\n";
  else if (children)
    o << "sweep process: gone (pid " << pid << "), its last children still finishing (they hold "
      << dir << "/.lock)\n";
  else
    o << "sweep process: not running"
      << (done + failed == int(sj["runs"].size()) ? "" : " (the same tda sweep command resumes it)")
      << "\n";
  o << lines.str();
  return o.str();
}

}  // namespace tda
