#include "eval/scrolls_data.h"

#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"
#include "eval/longctx_metrics.h"

namespace tda {

using json = nlohmann::json;

bool scrolls_is_summary(const std::string& task) {
  check_scrolls_task(task);
  return task != "qasper";
}

void check_scrolls_task(const std::string& task) {
  TDA_CHECK(
      task == "qmsum" || task == "summ_screen_fd" || task == "gov_report" || task == "qasper",
      "eval longctx: unknown --task '" + task + "' (qmsum, summ_screen_fd, gov_report, qasper)");
}

ScrollsDataset load_scrolls(const std::string& path, const std::string& task) {
  check_scrolls_task(task);
  TDA_CHECK(path_exists(path), "eval longctx: cannot open --data '" + path + "'");
  const std::vector<char> bytes = read_file_bytes(path);
  return parse_scrolls(std::string(bytes.begin(), bytes.end()), path, task);
}

ScrollsDataset parse_scrolls(const std::string& text, const std::string& path,
                             const std::string& task) {
  check_scrolls_task(task);
  ScrollsDataset d;
  d.task = task;
  d.path = path;
  std::map<std::string, size_t> by_id;
  size_t line = 0;
  for (size_t b = 0; b < text.size();) {
    size_t e = text.find('\n', b);
    if (e == std::string::npos) e = text.size();
    const std::string l = text.substr(b, e - b);
    b = e + 1;
    ++line;
    if (l.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(line);
    json j;
    try {
      j = json::parse(l);
    } catch (const json::exception& ex) {
      throw Error("eval longctx: " + where + ": not JSON: " + ex.what());
    }
    TDA_CHECK(j.is_object(), "eval longctx: " + where + ": expected a JSON object");
    auto str = [&](const char* key) {
      TDA_CHECK(j.contains(key) && j[key].is_string(),
                "eval longctx: " + where + ": missing string field '" + key + "'");
      return j[key].get<std::string>();
    };
    std::vector<std::string> outs;
    if (j.contains("outputs")) {
      TDA_CHECK(j["outputs"].is_array(), "eval longctx: " + where + ": 'outputs' must be a list");
      for (const auto& o : j["outputs"]) {
        TDA_CHECK(o.is_string(), "eval longctx: " + where + ": 'outputs' must hold strings");
        outs.push_back(o.get<std::string>());
      }
    } else {
      outs.push_back(str("output"));
    }
    ++d.rows;
    const std::string id = str("id"), input = str("input");
    auto it = by_id.find(id);
    if (it == by_id.end()) {
      ScrollsExample ex;
      ex.id = id;
      ex.pid = j.contains("pid") && j["pid"].is_string() ? j["pid"].get<std::string>() : id;
      ex.input = input;
      ex.outputs = outs;
      ex.line = line;
      by_id[id] = d.examples.size();
      d.examples.push_back(std::move(ex));
    } else {
      ScrollsExample& ex = d.examples[it->second];
      TDA_CHECK(ex.input == input, "eval longctx: " + where + ": id '" + id +
                                       "' repeats with another input than on line " +
                                       std::to_string(ex.line));
      ex.outputs.insert(ex.outputs.end(), outs.begin(), outs.end());
    }
  }
  TDA_CHECK(!d.examples.empty(), "eval longctx: " + path + ": no examples");
  if (task == "qmsum" || task == "qasper")
    for (const auto& ex : d.examples)
      TDA_CHECK(ex.input.find("\n\n") != std::string::npos,
                "eval longctx: " + path + ":" + std::to_string(ex.line) + ": " + task +
                    " input must start with the query followed by a blank line (SCROLLS format)");
  return d;
}

ScrollsPrompt scrolls_prompt(const std::string& task, const ScrollsExample& ex) {
  ScrollsPrompt p;
  if (task == "gov_report" || task == "summ_screen_fd") {
    p.text = ex.input + "\n\nQuestion: What is a summary of the preceding text?\nAnswer:";
    return p;
  }
  check_scrolls_task(task);
  const size_t k = ex.input.find("\n\n");
  const std::string question = ex.input.substr(0, k), text = ex.input.substr(k + 2);
  p.text = text + "\n\nQuestion: " + question + "\nAnswer:";
  if (task == "qasper") {
    p.yes_no = true;
    for (const auto& o : ex.outputs) {
      const std::string n = squad_normalize(o);
      p.yes_no = p.yes_no && (n == "yes" || n == "no");
    }
  }
  return p;
}

}  // namespace tda
