#include "sweep/status.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace tda {

json RunStatus::to_json() const {
  json j = {{"state", state},
            {"group", group},
            {"step", step},
            {"max_steps", max_steps},
            {"train_seconds", train_seconds},
            {"evals", evals},
            {"eval_errors", eval_errors},
            {"eval_notes", eval_notes}};
  if (!error.empty()) j["error"] = error;
  return j;
}

TrainProgress last_train_record(const std::string& path) {
  TrainProgress p;
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return p;
  const std::streamoff size = f.tellg();
  const std::streamoff from = size > 65536 ? size - 65536 : 0;
  f.seekg(from);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string line;
  bool first = from > 0;  // the first line of a tail window may be cut
  while (std::getline(ss, line)) {
    if (first) {
      first = false;
      continue;
    }
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || j.value("type", "") != "train") continue;
    p.step = j.value("step", -1);
    p.loss = j.value("loss", 0.0);
    p.ms = j.value("ms", 0.0);
  }
  return p;
}

std::string fmt_seconds(double s) {
  const long t = long(s + 0.5);
  char b[32];
  if (t >= 3600)
    std::snprintf(b, sizeof b, "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else if (t >= 60)
    std::snprintf(b, sizeof b, "%ldm%02lds", t / 60, t % 60);
  else
    std::snprintf(b, sizeof b, "%lds", t);
  return b;
}

}  // namespace tda
