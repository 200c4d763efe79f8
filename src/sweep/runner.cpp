#include "sweep/runner.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "core/file_lock.h"
#include "core/fs.h"
#include "sweep/evals.h"
#include "sweep/gpus.h"
#include "sweep/process.h"
#include "sweep/status.h"
#include "train/checkpoint.h"

namespace tda {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int> g_signals{0};
void on_sweep_signal(int) {
  g_signals.fetch_add(1);
}

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The run's checkpoint at max_steps, or "" (not trained yet, or a checkpoint that cannot be read).
std::string final_checkpoint(const std::string& dir, int max_steps) {
  try {
    const std::string ck = latest_checkpoint(dir);
    if (!ck.empty() && read_checkpoint_state(ck).step == max_steps) return ck;
  } catch (const Error&) {
  }
  return "";
}

enum class Phase { Waiting, Training, Evaluating, Finished };

// One evaluation at a time runs in a lane: one lane per GPU of the job's slot when the
// evaluations run on GPUs (sweep/gpus.h), else one.
struct EvalLane {
  ChildProcess child;
  std::string gpu;  // its CUDA_VISIBLE_DEVICES ("" = the slot's environment)
  size_t eval = 0;  // index in Job::evals of the evaluation it runs
  Clock::time_point t0;
};

struct Job {
  const SweepRun* run = nullptr;
  std::string dir;
  bool selected = true;
  Phase phase = Phase::Waiting;
  RunStatus st;
  std::vector<EvalStep> evals;
  bool planned = false;  // evals and lanes are set (the evaluation phase began)
  size_t next_eval = 0;  // the first evaluation not started yet
  ChildProcess child;    // the training run
  std::vector<EvalLane> lanes;
  int slot = -1;
  int start_step = 0;  // of this training child (its checkpoint's step)
  Clock::time_point t0;
};

class Runner {
 public:
  Runner(const Sweep& s, const SweepOptions& o) : s_(s), o_(o) {
    dir_ = o.out_dir.empty() ? "runs/" + s.name : o.out_dir;
    tty_ = ::isatty(2);
    for (const auto& r : s.runs) {
      Job j;
      j.run = &r;
      j.dir = dir_ + "/" + r.name;
      j.selected = o.only.empty() || std::count(o.only.begin(), o.only.end(), r.name);
      j.st.group = r.group;
      j.st.max_steps = r.cfg.train.max_steps;
      jobs_.push_back(std::move(j));
    }
    // Training time already spent in earlier sweeps of this directory (status.json).
    try {
      const std::vector<char> b = read_file_bytes(dir_ + "/status.json");
      const json old = json::parse(std::string(b.begin(), b.end()));
      for (auto& j : jobs_)
        j.st.train_seconds =
            old.at("runs").value(j.run->name, json::object()).value("train_seconds", 0.0);
    } catch (const std::exception&) {
    }
    for (const auto& n : o.only)
      TDA_CHECK(
          std::any_of(s.runs.begin(), s.runs.end(), [&](const SweepRun& r) { return r.name == n; }),
          "sweep: --only " + n + ": no run of that name in " + s.spec_path);
  }

  int run();
  void dry_run();

 private:
  std::vector<std::string> train_args(const Job& j) const;
  Job* find(const std::string& name) {
    for (auto& j : jobs_)
      if (j.run->name == name) return &j;
    return nullptr;
  }
  void lock();
  void write_sweep_json() const;
  void write_status() const;
  void say(const Job* j, const std::string& msg);
  void progress(bool force);
  std::vector<std::string> child_env(const Job& j) const;
  std::vector<std::string> eval_gpus(const Job& j) const;
  void begin(Job& j);
  void advance(Job& j);  // starts evaluations on the free lanes, or finishes the job
  void child_done(Job& j);
  void eval_done(Job& j, EvalLane& lane);
  void start_eval(Job& j, EvalLane& lane, size_t index);
  void finish(Job& j, const std::string& state, const std::string& error = "");

  const Sweep& s_;
  const SweepOptions& o_;
  FileLock lock_;  // dir_/.lock, held until the sweep (and the children sharing it) exit
  std::string dir_;
  std::vector<std::string> node_ = node_gpus();
  std::vector<Job> jobs_;
  bool tty_ = false, stopping_ = false;
  int forwarded_ = 0;
  bool status_line_ = false;
  Clock::time_point start_ = Clock::now(), last_progress_ = Clock::now();
  double train_seconds_ = 0;
  long train_steps_ = 0;  // measured by the sweep, for its ETA
};

std::vector<std::string> Runner::train_args(const Job& j) const {
  std::vector<std::string> a = {"train", "--config", j.run->config, "--out",
                                j.dir,   "--resume", "auto"};
  for (const auto& kv : j.run->sets) a.insert(a.end(), {"--set", kv});
  if (!j.run->init_from.empty())
    a.insert(a.end(), {"--set", "train.init_from=" + dir_ + "/" + j.run->init_from});
  if (o_.gpus > 0) a.insert(a.end(), {"--gpus", std::to_string(o_.gpus)});
  return a;
}

void Runner::lock() {
  make_dirs(dir_);
  const std::string path = dir_ + "/.lock";
  // Inherited: the children share the lock, so a sweep that was killed keeps it until its last
  // child (a training run checkpointing after SIGTERM) has exited.
  if (!lock_.acquire(path, /*wait=*/false, /*inherit=*/true)) {
    say(nullptr, "waiting for another tda sweep (or the children of a killed one: " +
                     lock_.holder() + ") on " + dir_ + " to finish (" + path + ")");
    lock_.acquire(path, /*wait=*/true, /*inherit=*/true);
  }
  if (lock_.unsupported())
    say(nullptr, "warning: " + path +
                     ": this file system has no file locks: nothing stops a "
                     "second sweep here (each run's own lock is then missing too)");
}

void Runner::write_sweep_json() const {
  json runs = json::array();
  for (const auto& j : jobs_) {
    const SweepRun& r = *j.run;
    runs.push_back({{"name", r.name},
                    {"group", r.group},
                    {"dir", j.dir},
                    {"config", r.config},
                    {"set", r.sets},
                    {"init_from", r.init_from},
                    {"kind", r.cfg.attention.kind},
                    {"max_steps", r.cfg.train.max_steps},
                    {"train_command", "tda " + quote_command(train_args(j))}});
  }
  const json out = {{"name", s_.name}, {"spec", s_.spec_path}, {"about", s_.raw["about"]},
                    {"runs", runs},    {"eval", s_.eval},      {"parallel", o_.parallel},
                    {"gpus", o_.gpus}};
  write_file_durable(dir_ + "/sweep.json", out.dump(2) + "\n");
}

void Runner::write_status() const {
  json runs = json::object();
  // Runs not selected by --only keep what an earlier sweep recorded.
  try {
    const std::vector<char> b = read_file_bytes(dir_ + "/status.json");
    const json old = json::parse(std::string(b.begin(), b.end()));
    if (old.contains("runs") && old["runs"].is_object()) runs = old["runs"];
  } catch (const std::exception&) {
  }
  for (const auto& j : jobs_)
    if (j.selected) runs[j.run->name] = j.st.to_json();
  const json out = {{"sweep", s_.name},
                    {"updated", long(std::time(nullptr))},
                    {"elapsed_s", since(start_)},
                    {"runs", runs}};
  write_file_durable(dir_ + "/status.json", out.dump(2) + "\n");
}

void Runner::say(const Job* j, const std::string& msg) {
  char t[16];
  const std::time_t now = std::time(nullptr);
  std::strftime(t, sizeof t, "%H:%M:%S", std::localtime(&now));
  const std::string line = std::string("[") + t + "] " + (j ? j->run->name + ": " : "") + msg;
  if (status_line_) std::fputs("\r\033[K", stderr);
  status_line_ = false;
  std::fprintf(stderr, "%s\n", line.c_str());
  std::ofstream(dir_ + "/sweep.log", std::ios::app) << line << "\n";
}

// One line: runs done/failed, and for each running job its step, loss, time per step and ETA
// (from its metrics.jsonl), or the evaluation it is running.
void Runner::progress(bool force) {
  const double every = tty_ ? 1.0 : o_.progress_every;
  if (!force && since(last_progress_) < every) return;
  last_progress_ = Clock::now();
  int done = 0, failed = 0, selected = 0;
  long steps_left = 0;
  double s_per_step = train_steps_ > 0 ? train_seconds_ / double(train_steps_) : 0;
  std::string running;
  for (auto& j : jobs_) {
    if (!j.selected) continue;
    ++selected;
    done += j.st.state == "done";
    failed += j.st.state == "failed" || j.st.state == "blocked";
    if (j.phase == Phase::Training) {
      const TrainProgress p = last_train_record(j.dir + "/metrics.jsonl");
      if (p.step >= 0) {
        j.st.step = p.step;
        if (p.ms > 0) s_per_step = p.ms / 1000.0;
      }
    }
    if (j.phase == Phase::Waiting || j.phase == Phase::Training)
      steps_left += std::max(0, j.st.max_steps - std::max(0, j.st.step));
    if (j.phase == Phase::Training) {
      const int left = std::max(0, j.st.max_steps - j.st.step);
      char b[200];
      std::snprintf(
          b, sizeof b, " | %s: step %d/%d%s", j.run->name.c_str(), std::max(0, j.st.step),
          j.st.max_steps,
          s_per_step > 0 ? (", " + fmt_seconds(s_per_step * left) + " left").c_str() : "");
      running += b;
    } else if (j.phase == Phase::Evaluating) {
      std::string names;
      for (const EvalLane& l : j.lanes)
        if (l.child.running()) names += (names.empty() ? "" : ",") + j.evals[l.eval].name;
      running += " | " + j.run->name + ": eval " + names + " (" + std::to_string(j.next_eval) +
                 "/" + std::to_string(j.evals.size()) + " started)";
    }
  }
  std::string line = "sweep " + s_.name + ": " + std::to_string(done) + "/" +
                     std::to_string(selected) + " done" +
                     (failed ? ", " + std::to_string(failed) + " failed" : "") + running;
  if (s_per_step > 0 && steps_left > 0)
    line += " | training left ~" +
            fmt_seconds(s_per_step * double(steps_left) / std::max(1, o_.parallel));
  if (tty_) {
    if (line.size() > 200) line = line.substr(0, 197) + "...";
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
    status_line_ = true;
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fflush(stderr);
}

std::vector<std::string> Runner::child_env(const Job& j) const {
  std::vector<std::string> env;
  if (o_.parallel > 1 && o_.gpus == 0) {
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    const std::string n = std::to_string(std::max(1u, cores / unsigned(o_.parallel)));
    env = {"OMP_NUM_THREADS=" + n, "OPENBLAS_NUM_THREADS=" + n};
  }
  if (o_.parallel > 1 && o_.gpus > 0) {  // each slot its own GPUs
    std::vector<std::string> node = node_;
    for (int g = int(node.size()); node_.empty() && g < o_.parallel * o_.gpus; ++g)
      node.push_back(std::to_string(g));  // no GPU found: ids as the slots number them
    std::vector<std::string> share = slot_gpus(node, j.slot, o_.parallel, o_.gpus);
    share.resize(std::min(share.size(), size_t(o_.gpus)));
    env.push_back("CUDA_VISIBLE_DEVICES=" + join_gpus(share));
  }
  return env;
}

std::vector<std::string> Runner::eval_gpus(const Job& j) const {
  if (s_.eval["device"].get<std::string>() != "cuda") return {""};
  std::vector<std::string> g = slot_gpus(node_, std::max(0, j.slot), o_.parallel, o_.gpus);
  if (g.empty()) g.push_back("");
  return g;
}

void Runner::finish(Job& j, const std::string& state, const std::string& error) {
  j.phase = Phase::Finished;
  j.st.state = state;
  if (!error.empty()) j.st.error = error;
  j.slot = -1;
  write_status();
}

void Runner::begin(Job& j) {
  j.st.error.clear();
  const std::string ck = final_checkpoint(j.dir, j.st.max_steps);
  if (!ck.empty()) {
    j.st.step = j.st.max_steps;
    j.phase = Phase::Evaluating;
    say(&j, "trained (" + ck + ")");
  } else {
    j.phase = Phase::Training;
    j.st.state = "training";
    const std::string prev = latest_checkpoint(j.dir);
    j.start_step = 0;
    try {
      if (!prev.empty()) j.start_step = read_checkpoint_state(prev).step;
    } catch (const Error&) {
    }
    j.st.step = j.start_step;
    say(&j, prev.empty() ? "training (" + std::to_string(j.st.max_steps) + " steps; log " + j.dir +
                               "/train.log)"
                         : "resuming from " + prev);
    make_dirs(j.dir);
    j.t0 = Clock::now();
    j.child.start(train_args(j), child_env(j), j.dir + "/train.log");
    write_status();
    return;
  }
  advance(j);
}

void Runner::start_eval(Job& j, EvalLane& lane, size_t index) {
  const EvalStep& e = j.evals[index];
  std::vector<std::string> a = e.args;
  const std::string tmp = j.dir + "/eval/." + e.name + ".tmp.json";
  a.insert(a.end(), {"--out", tmp});
  std::vector<std::string> env = child_env(j);
  std::string on;
  if (!lane.gpu.empty()) {
    env.push_back("CUDA_VISIBLE_DEVICES=" + lane.gpu);  // after the slot's: this one counts
    on = "CUDA_VISIBLE_DEVICES=" + lane.gpu + " ";
  }
  // Evaluations side by side write their output each to its own file: one shared log would
  // interleave them, and a failure's error line would be read from another's output.
  const bool own_log = j.lanes.size() > 1;
  const std::string log = own_log ? j.dir + "/eval/" + e.name + ".log" : j.dir + "/eval.log";
  std::ofstream(j.dir + "/eval.log", std::ios::app)
      << "$ " << on << "tda " << quote_command(a)
      << (own_log ? "    # output: eval/" + e.name + ".log" : "") << "\n";
  j.st.evals[e.name] = "running";
  lane.eval = index;
  lane.t0 = Clock::now();
  lane.child.start(a, env, log);
  write_status();
}

// Evaluations in order, each free lane taking the next: a file that exists is done, a step
// without data is skipped; with none left and every lane idle the job is finished.
void Runner::advance(Job& j) {
  if (j.phase != Phase::Evaluating) return;
  if (!j.planned) {
    j.planned = true;
    if (!o_.no_eval) {
      j.evals = plan_evals(*j.run, s_.eval, final_checkpoint(j.dir, j.st.max_steps));
      make_dirs(j.dir + "/eval");
      j.st.state = "evaluating";
    }
    for (const std::string& gpu : eval_gpus(j)) {
      j.lanes.emplace_back();
      j.lanes.back().gpu = gpu;
    }
  }
  for (EvalLane& lane : j.lanes) {
    while (!lane.child.running() && j.next_eval < j.evals.size() && !stopping_) {
      const size_t i = j.next_eval++;
      const EvalStep& e = j.evals[i];
      if (path_exists(eval_file(j.dir, e.name))) {
        j.st.evals[e.name] = "done";
      } else if (!e.skip.empty()) {
        j.st.evals[e.name] = "skipped";
        j.st.eval_notes[e.name] = e.skip;
        say(&j, "eval " + e.name + " skipped: " + e.skip);
      } else {
        start_eval(j, lane, i);
      }
    }
  }
  if (stopping_ || std::any_of(j.lanes.begin(), j.lanes.end(),
                               [](const EvalLane& l) { return l.child.running(); }))
    return;
  std::string failed;
  for (const auto& [name, state] : j.st.evals)
    if (state == "failed") failed += (failed.empty() ? "" : ", ") + name;
  say(&j, failed.empty() ? "done" : "done; evaluations failed: " + failed);
  finish(j, "done");
}

void Runner::child_done(Job& j) {
  const int code = j.child.exit_code();
  const double secs = since(j.t0);
  if (j.phase == Phase::Training) {
    const TrainProgress p = last_train_record(j.dir + "/metrics.jsonl");
    j.st.train_seconds += secs;
    if (p.step >= 0) j.st.step = p.step;
    if (p.step > j.start_step) {
      train_seconds_ += secs;
      train_steps_ += p.step - j.start_step;
    }
    if (code == 0 && !final_checkpoint(j.dir, j.st.max_steps).empty()) {
      say(&j, "trained " + std::to_string(j.st.max_steps) + " steps in " + fmt_seconds(secs));
      j.phase = Phase::Evaluating;
      advance(j);
    } else if (stopping_) {
      say(&j, "interrupted at step " + std::to_string(std::max(0, j.st.step)) +
                  " (checkpointed; the same command resumes it)");
      finish(j, "interrupted");
    } else {
      const std::string err = code == 0 ? "tda train stopped at step " + std::to_string(j.st.step) +
                                              " of " + std::to_string(j.st.max_steps)
                                        : j.child.error_line();
      say(&j, "FAILED: " + err + " (log " + j.dir + "/train.log)");
      finish(j, "failed", err);
    }
    return;
  }
}

void Runner::eval_done(Job& j, EvalLane& lane) {
  const int code = lane.child.exit_code();
  const double secs = since(lane.t0);
  const EvalStep& e = j.evals[lane.eval];
  const std::string tmp = j.dir + "/eval/." + e.name + ".tmp.json";
  if (code == 0 && path_exists(tmp)) {
    TDA_CHECK(std::rename(tmp.c_str(), eval_file(j.dir, e.name).c_str()) == 0,
              "sweep: cannot rename " + tmp);
    j.st.evals[e.name] = "done";
    j.st.eval_errors.erase(e.name);
    say(&j, "eval " + e.name + " (" + fmt_seconds(secs) + ")");
  } else if (stopping_) {
    std::remove(tmp.c_str());
    j.st.evals[e.name] = "interrupted";
    if (std::none_of(j.lanes.begin(), j.lanes.end(),
                     [](const EvalLane& l) { return l.child.running(); }))
      finish(j, "interrupted");
    return;
  } else {
    std::remove(tmp.c_str());
    j.st.evals[e.name] = "failed";
    j.st.eval_errors[e.name] = lane.child.error_line();
    say(&j, "eval " + e.name + " FAILED: " + j.st.eval_errors[e.name] + " (log " + j.dir +
                (j.lanes.size() > 1 ? "/eval/" + e.name + ".log)" : "/eval.log)"));
  }
  advance(j);
}

int Runner::run() {
  lock();
  // Whose lock it is, for `tda sweep status` (sweep/watch.h).
  write_file_durable(dir_ + "/sweep.pid", std::to_string(::getpid()) + "\n");
  write_sweep_json();
  const size_t lanes = jobs_.empty() ? 1 : eval_gpus(jobs_.front()).size();
  say(nullptr,
      "sweep " + s_.name + ": " + std::to_string(jobs_.size()) + " runs in " + dir_ +
          (o_.parallel > 1 ? ", " + std::to_string(o_.parallel) + " at once" : "") +
          (lanes > 1 ? "; each run's evaluations " + std::to_string(lanes) + " at once, one per GPU"
                     : ""));
  auto old_int = std::signal(SIGINT, on_sweep_signal);
  auto old_term = std::signal(SIGTERM, on_sweep_signal);
  auto old_hup = std::signal(SIGHUP, on_sweep_signal);   // a closed terminal
  if (old_hup == SIG_IGN) std::signal(SIGHUP, SIG_IGN);  // but not under nohup
  for (;;) {
    const int sigs = g_signals.load();
    if (sigs > forwarded_) {
      if (!stopping_)
        say(nullptr,
            "interrupt: stopping the running children (training checkpoints first); "
            "run the same command again to resume" +
                std::string(sigs > 1 ? "" : " (interrupt again to stop at once)"));
      stopping_ = true;
      for (auto& j : jobs_) {
        j.child.signal_group(SIGINT);
        for (const EvalLane& l : j.lanes) l.child.signal_group(SIGINT);
      }
      forwarded_ = sigs;
    }
    int active = 0;
    for (auto& j : jobs_) {
      if (j.child.running() && j.child.poll()) child_done(j);
      for (EvalLane& l : j.lanes)
        if (l.child.running() && l.child.poll()) eval_done(j, l);
      active += j.phase == Phase::Training || j.phase == Phase::Evaluating;
    }
    if (!stopping_) {
      for (auto& j : jobs_) {
        if (!j.selected || j.phase != Phase::Waiting) continue;
        if (!j.run->init_from.empty()) {
          Job* dep = find(j.run->init_from);
          const bool trained = !final_checkpoint(dep->dir, dep->st.max_steps).empty();
          if (!trained && (!dep->selected || dep->phase == Phase::Finished)) {
            const std::string why = "init_from run " + dep->run->name + " has not trained (" +
                                    (dep->selected ? dep->st.state : "not in --only") + ")";
            say(&j, "blocked: " + why);
            finish(j, "blocked", why);
            continue;
          }
          if (!trained) continue;
        }
        if (active >= o_.parallel) break;
        std::vector<bool> used(size_t(o_.parallel), false);
        for (const auto& k : jobs_)
          if (k.slot >= 0) used[size_t(k.slot)] = true;
        j.slot = int(std::find(used.begin(), used.end(), false) - used.begin());
        ++active;
        begin(j);
      }
    }
    bool busy = false;
    for (const auto& j : jobs_) {
      busy = busy || j.child.running();
      for (const EvalLane& l : j.lanes) busy = busy || l.child.running();
    }
    const bool waiting = !stopping_ && std::any_of(jobs_.begin(), jobs_.end(), [](const Job& j) {
      return j.selected && j.phase != Phase::Finished;
    });
    if (!busy && !waiting) break;
    progress(false);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::signal(SIGINT, old_int);
  std::signal(SIGTERM, old_term);
  std::signal(SIGHUP, old_hup);
  write_status();

  int bad = 0, unfinished = 0;
  std::string lines;
  for (const auto& j : jobs_) {
    if (!j.selected) continue;
    if (j.st.state == "failed" || j.st.state == "blocked") {
      ++bad;
      lines += "\n  " + j.run->name + ": " + j.st.state + ": " + j.st.error;
    }
    for (const auto& [name, err] : j.st.eval_errors) {
      ++bad;
      lines += "\n  " + j.run->name + ": eval " + name + " failed: " + err;
    }
    unfinished += j.st.state != "done" && j.st.state != "failed" && j.st.state != "blocked";
  }
  const std::string took = " after " + fmt_seconds(since(start_));
  if (stopping_) {
    say(nullptr, "interrupted" + took + ": " + std::to_string(unfinished) +
                     " runs unfinished; `tda sweep " + s_.spec_path + "` resumes");
    return 130;
  }
  if (bad) {
    say(nullptr, "finished" + took + " with " + std::to_string(bad) + " failure(s):" + lines);
    return 1;
  }
  say(nullptr, "finished" + took + ": every run trained and evaluated; `tda report " + dir_ + "`");
  return 0;
}

void Runner::dry_run() {
  std::printf("sweep %s: %zu runs in %s\n", s_.name.c_str(), jobs_.size(), dir_.c_str());
  for (const auto& j : jobs_) {
    if (!j.selected) continue;
    const std::string ck = final_checkpoint(j.dir, j.st.max_steps);
    std::printf("\n%s (group %s, %s, %d steps)%s\n", j.run->name.c_str(), j.run->group.c_str(),
                j.run->cfg.attention.kind.c_str(), j.st.max_steps, ck.empty() ? "" : ": trained");
    if (!j.run->init_from.empty()) std::printf("  after %s\n", j.run->init_from.c_str());
    std::printf("  tda %s\n", quote_command(train_args(j)).c_str());
    if (o_.no_eval) continue;
    const std::string at =
        ck.empty() ? j.dir + "/checkpoints/" + checkpoint_dir_name(j.st.max_steps) : ck;
    for (const auto& e : plan_evals(*j.run, s_.eval, at)) {
      const bool have = path_exists(eval_file(j.dir, e.name));
      if (have || !e.skip.empty())
        std::printf("  eval %s: %s\n", e.name.c_str(),
                    have ? "done" : ("skipped: " + e.skip).c_str());
      else
        std::printf("  eval %s: tda %s\n", e.name.c_str(), quote_command(e.args).c_str());
    }
  }
}

}  // namespace

int run_sweep(const Sweep& sweep, const SweepOptions& o) {
  TDA_CHECK(o.parallel >= 1, "sweep: --parallel must be >= 1");
  TDA_CHECK(o.gpus >= 0, "sweep: --gpus must be >= 0");
  if (!sweep.eval["mc"]["data"].get<std::string>().empty())
    ::setenv("TDA_EVAL_DATA", sweep.eval["mc"]["data"].get<std::string>().c_str(), 1);
  Runner r(sweep, o);
  if (o.dry_run) {
    r.dry_run();
    return 0;
  }
  return r.run();
}

}  // namespace tda
