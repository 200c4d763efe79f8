#include "sweep/spec.h"

#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"

namespace tda {

// The paper's protocol (docs/sweeps.md): validation loss, the six zero-shot tasks, diagnostics
// over many validation sequences (and untrained, and past the trained length), passkey with
// 1/2/4 needles at 500..4000 tokens, SCROLLS on the extended models.
const json& sweep_defaults() {
  static const json d = json::parse(R"({
    "name": "", "about": [], "config": "", "set": {}, "runs": [],
    "eval": {
      "device": "cpu", "dtype": "fp32",
      "val": {"enabled": true, "sequences": 0, "groups": []},
      "mc": {"enabled": true, "groups": [], "limit": 0, "data": "", "arc_fix": true,
             "tasks": ["hellaswag", "arc_easy", "arc_challenge", "openbookqa", "piqa",
                       "winogrande"]},
      "diag": {"enabled": true, "groups": ["main"], "sequences": 64, "untrained": true,
               "long_factor": 4, "long_sequences": 8},
      "passkey": {"enabled": true, "groups": ["main", "extension"], "needles": [1, 2, 4],
                  "lengths": [500, 1000, 1500, 2000, 2500, 3000, 3500, 4000], "trials": 100},
      "scrolls": {"enabled": true, "groups": ["extension"], "data": "", "limit": 0,
                  "max_new_tokens": 256, "max_context": 0,
                  "tasks": ["qmsum", "summ_screen_fd", "gov_report", "qasper"]}
    }
  })");
  return d;
}

const json& sweep_run_defaults() {
  static const json d =
      json::parse(R"({"name": "", "group": "main", "config": "", "set": {}, "init_from": ""})");
  return d;
}

bool eval_applies(const json& block, const std::string& group) {
  const json& g = block.at("groups");
  if (g.empty()) return true;
  for (const auto& x : g)
    if (x.is_string() && x.get<std::string>() == group) return true;
  return false;
}

namespace {

json read_spec(const std::string& path) {
  std::ifstream f(path);
  TDA_CHECK(f.good(), "sweep: cannot open '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_json_document(ss.str(), "sweep: '" + path + "'");
}

std::string dir_of(const std::string& path) {
  const auto p = path.find_last_of('/');
  return p == std::string::npos ? std::string(".") : path.substr(0, p);
}

std::string stem(const std::string& path) {
  const auto s = path.find_last_of('/');
  const std::string f = path.substr(s == std::string::npos ? 0 : s + 1);
  return f.substr(0, f.rfind('.'));
}

// A spec's config paths are relative to the spec file (as a config's `base`); the command
// line's are relative to the working directory.
std::string beside(const std::string& spec, const std::string& p) {
  return p.empty() || p[0] == '/' ? p : dir_of(spec) + "/" + p;
}

// {"a.b": 1, "c": "x"} -> ["a.b=1", "c=\"x\""]: JSON text, so a string stays a string.
std::vector<std::string> set_list(const json& sets, const std::string& where) {
  TDA_CHECK(sets.is_object(), where + " must be an object of \"key.path\": value");
  std::vector<std::string> r;
  for (auto it = sets.begin(); it != sets.end(); ++it)
    r.push_back(it.key() + "=" + it.value().dump());
  return r;
}

// A list of the given JSON type, or an error naming the key.
void check_list(const json& v, bool (json::*is)() const noexcept, const std::string& key,
                const char* what) {
  for (const auto& x : v)
    TDA_CHECK((x.*is)(), "sweep: '" + key + "' must be a list of " + what + ", got " + v.dump());
}

void check_eval(const json& e, const std::string& origin) {
  for (auto it = e.begin(); it != e.end(); ++it)
    if (it.value().is_object())
      check_list(it.value().at("groups"), &json::is_string, "eval." + it.key() + ".groups",
                 "strings");
  check_list(e["mc"]["tasks"], &json::is_string, "eval.mc.tasks", "strings");
  check_list(e["scrolls"]["tasks"], &json::is_string, "eval.scrolls.tasks", "strings");
  check_list(e["passkey"]["needles"], &json::is_number_integer, "eval.passkey.needles", "integers");
  check_list(e["passkey"]["lengths"], &json::is_number_integer, "eval.passkey.lengths", "integers");
  const std::set<std::string> mc = {"hellaswag",  "arc_easy", "arc_challenge",
                                    "openbookqa", "piqa",     "winogrande"};
  for (const auto& t : e["mc"]["tasks"])
    TDA_CHECK(mc.count(t.get<std::string>()), origin + ": eval.mc.tasks: unknown task " + t.dump() +
                                                  " (hellaswag, arc_easy, "
                                                  "arc_challenge, openbookqa, piqa, winogrande)");
  const std::set<std::string> sc = {"qmsum", "summ_screen_fd", "gov_report", "qasper"};
  for (const auto& t : e["scrolls"]["tasks"])
    TDA_CHECK(sc.count(t.get<std::string>()), origin + ": eval.scrolls.tasks: unknown task " +
                                                  t.dump() +
                                                  " (qmsum, summ_screen_fd, gov_report, qasper)");
  for (const auto& k : e["passkey"]["needles"])
    TDA_CHECK(k == 1 || k == 2 || k == 4,
              origin + ": eval.passkey.needles: " + k.dump() + " is not 1, 2 or 4");
  for (const char* key : {"sequences", "long_sequences", "long_factor"})
    TDA_CHECK(e["diag"][key].get<double>() >= 1, origin + ": eval.diag." + key + " must be >= 1");
  TDA_CHECK(e["passkey"]["trials"].get<double>() >= 1,
            origin + ": eval.passkey.trials must be >= 1");
}

}  // namespace

Sweep load_sweep(const std::string& spec_path, const SweepOverrides& o) {
  const json user = read_spec(spec_path);
  TDA_CHECK(user.is_object(), "sweep: '" + spec_path + "' must hold a JSON object");
  // `set` (free-form config keys) is checked when each run's config is resolved.
  json shape = user;
  shape.erase("runs");
  shape.erase("set");
  check_keys(shape, sweep_defaults(), spec_path);
  Sweep s;
  s.spec_path = spec_path;
  s.raw = sweep_defaults();
  merge_into(s.raw, user);
  s.name = s.raw["name"].get<std::string>();
  if (s.name.empty()) s.name = stem(spec_path);
  TDA_CHECK(s.name.find('/') == std::string::npos && s.name != "." && s.name != "..",
            spec_path + ": name \"" + s.name + "\" must be a plain directory name");
  check_list(s.raw["about"], &json::is_string, "about", "strings");
  json& ev = s.raw["eval"];
  if (!o.eval_data.empty()) ev["mc"]["data"] = o.eval_data;
  if (!o.scrolls_data.empty()) ev["scrolls"]["data"] = o.scrolls_data;
  if (!o.device.empty()) ev["device"] = o.device;
  if (!o.dtype.empty()) ev["dtype"] = o.dtype;
  check_eval(ev, spec_path);
  s.eval = ev;

  const std::string default_config =
      o.config.empty() ? beside(spec_path, s.raw["config"].get<std::string>()) : o.config;
  const std::vector<std::string> common = set_list(s.raw["set"], spec_path + ": 'set'");
  TDA_CHECK(s.raw["runs"].is_array() && !s.raw["runs"].empty(),
            spec_path + ": 'runs' must be a non-empty list of runs");
  std::set<std::string> names;
  for (size_t i = 0; i < s.raw["runs"].size(); ++i) {
    const json& ur = s.raw["runs"][i];
    const std::string where = spec_path + ": runs[" + std::to_string(i) + "]";
    TDA_CHECK(ur.is_object(), where + " must be an object");
    json shape_r = ur;
    shape_r.erase("set");
    check_keys(shape_r, sweep_run_defaults(), where);
    json r = sweep_run_defaults();
    merge_into(r, ur);
    SweepRun run;
    run.name = r["name"].get<std::string>();
    TDA_CHECK(!run.name.empty() && run.name.find('/') == std::string::npos && run.name[0] != '.',
              where + ": 'name' must be a plain directory name, got \"" + run.name + "\"");
    TDA_CHECK(names.insert(run.name).second, where + ": two runs are named \"" + run.name + "\"");
    run.group = r["group"].get<std::string>();
    run.config = r["config"].get<std::string>().empty()
                     ? default_config
                     : beside(spec_path, r["config"].get<std::string>());
    TDA_CHECK(!run.config.empty(),
              where + " (" + run.name + "): no config: give the spec a 'config' or the run one");
    run.sets = common;
    for (const auto& kv : set_list(r["set"], where + ": 'set'")) run.sets.push_back(kv);
    run.sets.insert(run.sets.end(), o.sets.begin(), o.sets.end());
    run.init_from = r["init_from"].get<std::string>();
    if (!run.init_from.empty())
      TDA_CHECK(names.count(run.init_from) && run.init_from != run.name,
                where + " (" + run.name + "): init_from \"" + run.init_from +
                    "\" is not a run listed before it in this sweep");
    try {
      run.cfg = load_config(run.config, run.sets);
    } catch (const Error& e) {
      throw Error("sweep: run " + run.name + ": " + e.what());
    }
    s.runs.push_back(std::move(run));
  }
  return s;
}

}  // namespace tda
