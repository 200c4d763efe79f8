#include "train/metrics_log.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"

namespace tda {

namespace {

// Whether a record of the old run belongs to the steps the resumed run will write again.
bool superseded(const std::string& line, int step) {
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return true;  // torn or foreign: not a record of this run
  if (!j.contains("step") || !j["step"].is_number_integer()) return false;
  const long s = j["step"].get<long>();
  const std::string type = j.value("type", "");
  return s > step || (s == step && (type == "val" || type == "eval"));
}

}  // namespace

FILE* open_metrics(const std::string& out_dir, int resumed_step, const std::string& checkpoint) {
  const std::string path = out_dir + "/metrics.jsonl";
  long n_moved = 0;
  if (resumed_step >= 0 && path_exists(path)) {
    const std::vector<char> bytes = read_file_bytes(path);
    std::string kept, moved;
    for (size_t b = 0; b < bytes.size();) {
      size_t e = b;
      while (e < bytes.size() && bytes[e] != '\n') ++e;
      const std::string line(bytes.data() + b, e - b);
      b = e + 1;
      if (line.empty()) continue;
      const bool old = superseded(line, resumed_step);
      (old ? moved : kept) += line + "\n";
      n_moved += old ? 1 : 0;
    }
    if (n_moved > 0) {
      // Appended first, so that a crash in between leaves a record in both files, never in none.
      const std::string side = out_dir + "/metrics.superseded.jsonl";
      std::string all;
      if (path_exists(side)) {
        const std::vector<char> o = read_file_bytes(side);
        all.assign(o.begin(), o.end());
      }
      write_file_durable(side, all + moved);
      write_file_durable(path, kept);
    }
  }
  FILE* f = std::fopen(path.c_str(), resumed_step >= 0 ? "a" : "w");
  TDA_CHECK(f, path + ": cannot open for writing");
  if (resumed_step >= 0) {
    const nlohmann::json r = {{"type", "resume"},
                              {"step", resumed_step},
                              {"checkpoint", checkpoint},
                              {"superseded", n_moved}};
    std::fputs((r.dump() + "\n").c_str(), f);
    std::fflush(f);
  }
  return f;
}

}  // namespace tda
