#include "train/run_dir.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"

namespace tda {

namespace fs = std::filesystem;

const std::vector<std::string>& run_files() {
  static const std::vector<std::string> names = {"metrics.jsonl", "metrics.superseded.jsonl",
                                                 "config.json", "checkpoints", "tb"};
  return names;
}

std::string run_files_in(const std::string& dir) {
  std::string found;
  for (const auto& name : run_files())
    if (path_exists(dir + "/" + name)) found += (found.empty() ? "" : ", ") + name;
  return found;
}

std::string run_lock_path(const std::string& dir) {
  return dir + "/.train.lock";
}

FileLock lock_run_dir(const std::string& dir, bool inherit) {
  make_dirs(dir);
  FileLock lock;
  if (!lock.acquire(run_lock_path(dir), /*wait=*/false, inherit))
    throw Error(dir + " is in use by another tda train (" + lock.holder() + ", lock " +
                lock.path() +
                "): two writers would mix their checkpoints; wait for it to finish or stop it "
                "(SIGTERM checkpoints it), or train into another --out");
  if (lock.unsupported())
    spdlog::warn(
        "{}: this file system has no file locks: nothing stops a second tda train on {} "
        "(docs/checkpoints.md, \"One writer per run directory\")",
        lock.path(), dir);
  return lock;
}

std::string checkpoint_evidence(const std::string& dir) {
  std::string why;
  // The newest checkpoint record: a line of metrics.jsonl (`"type":"checkpoint"`). Lines are
  // parsed only when they can be one, so a long run's file is read at disk speed.
  std::ifstream f(dir + "/metrics.jsonl");
  std::string line;
  long step = -1;
  while (std::getline(f, line)) {
    if (line.find("\"checkpoint\"") == std::string::npos) continue;
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.value("type", "") == "checkpoint" && j.contains("step") &&
        j["step"].is_number_integer())
      step = j["step"].get<long>();
  }
  if (step >= 0) why = "metrics.jsonl records a checkpoint at step " + std::to_string(step);
  std::vector<std::string> aside;
  const fs::path root = fs::path(dir) / "checkpoints";
  std::error_code ec;
  if (fs::is_directory(root, ec))
    for (const auto& e : fs::directory_iterator(root, ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("step_", 0) == 0 && name.find(".corrupt") != std::string::npos)
        aside.push_back(name);
    }
  std::sort(aside.begin(), aside.end());
  if (!aside.empty()) {
    why += std::string(why.empty() ? "" : "; ") + "kept aside:";
    for (const auto& a : aside) why += " " + a;
  }
  return why;
}

}  // namespace tda
