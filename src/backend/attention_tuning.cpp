#include "backend/attention_tuning.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/fs.h"

namespace tda {

const std::vector<std::string>& tuning_shapes(const std::string& pass) {
  static const std::vector<std::string> fwd = {"64x64", "128x64", "64x128"},
                                        bwd = {"split", "atomic", "split-2stage", "atomic-2stage"},
                                        none;
  return pass == "forward" ? fwd : pass == "backward" ? bwd : none;
}

std::string fwd_shape_name(const AttnFwdShape& s) {
  return std::to_string(s.rows) + "x" + std::to_string(s.keys);
}

AttnFwdShape parse_fwd_shape(const std::string& name) {
  const size_t x = name.find('x');
  TDA_CHECK(x != std::string::npos && x > 0 && x + 1 < name.size() &&
                name.find_first_not_of("0123456789x") == std::string::npos,
            "attention tuning: forward shape \"" + name + "\" is not ROWSxKEYS");
  return {std::stoi(name.substr(0, x)), std::stoi(name.substr(x + 1))};
}

std::string bwd_shape_name(const AttnBwdShape& s) {
  return std::string(s.atomic ? "atomic" : "split") + (s.stages == 2 ? "-2stage" : "");
}

AttnBwdShape parse_bwd_shape(const std::string& name) {
  for (const bool atomic : {false, true})
    for (const int stages : {1, 2})
      if (bwd_shape_name({atomic, stages}) == name) return {atomic, stages};
  throw Error("attention tuning: backward shape \"" + name +
              "\" is not split, atomic, split-2stage or atomic-2stage");
}

namespace {

// One entry of the file, checked; `where` names it in messages ("FILE: entries[3]").
TuningEntry parse_entry(const json& e, const std::string& where) {
  TDA_CHECK(e.is_object(), where + " is not an object");
  auto field = [&](const char* key) -> const json& {
    TDA_CHECK(e.contains(key), where + " has no \"" + key + "\"");
    return e.at(key);
  };
  TuningEntry t;
  const json &kind = field("kind"), &dims = field("head_dims"), &T = field("T"),
             &pass = field("pass"), &choice = field("choice"), &ms = field("ms");
  TDA_CHECK(kind.is_string() && !kind.get<std::string>().empty(),
            where + ".kind must be an attention kind");
  TDA_CHECK(dims.is_array() && dims.size() == 2 && dims[0].is_number_integer() &&
                dims[1].is_number_integer() && dims[0] > 0 && dims[1] > 0,
            where + ".head_dims must be [Dqk, Dv], two positive integers");
  TDA_CHECK(T.is_number_integer() && T > 0, where + ".T must be a positive integer");
  t.kind = kind.get<std::string>();
  t.Dqk = dims[0].get<int>();
  t.Dv = dims[1].get<int>();
  t.T = T.get<int>();
  TDA_CHECK(pass == "forward" || pass == "backward",
            where + ".pass must be \"forward\" or \"backward\"");
  t.pass = pass.get<std::string>();
  const auto& shapes = tuning_shapes(t.pass);
  TDA_CHECK(choice.is_string() &&
                std::count(shapes.begin(), shapes.end(), choice.get<std::string>()) == 1,
            where + ".choice must be one of the " + t.pass + " shapes (" +
                (t.pass == "forward" ? "64x64, 128x64, 64x128"
                                     : "split, atomic, split-2stage, atomic-2stage") +
                ")");
  t.choice = choice.get<std::string>();
  TDA_CHECK(ms.is_object() && ms.contains(t.choice),
            where + ".ms must hold the milliseconds of its choice \"" + t.choice + "\"");
  for (const auto& [shape, v] : ms.items())
    TDA_CHECK(std::count(shapes.begin(), shapes.end(), shape) == 1 && v.is_number() && v >= 0,
              where + ".ms[\"" + shape + "\"] must be the milliseconds of a " + t.pass + " shape");
  t.ms = ms;
  return t;
}

}  // namespace

AttentionTuning AttentionTuning::load(const std::string& path) {
  TDA_CHECK(path_exists(path), "attention.tuning: no such file: " + path);
  const std::vector<char> bytes = read_file_bytes(path);
  json j;
  try {
    j = json::parse(bytes.begin(), bytes.end());
  } catch (const json::exception& e) {
    throw Error(path + ": not JSON (" + e.what() + ")");
  }
  TDA_CHECK(!(j.is_object() && j.value("format", "") == "tda attention tuning 1"),
            path +
                ": format 1 (forward shapes named by their rows alone) is no longer read: "
                "run tda tune again (or tda tune --from the kit's timings)");
  TDA_CHECK(j.is_object() && j.value("format", "") == kFormat,
            path + ": not a tuning table (its \"format\" must be \"" + kFormat +
                "\"; tda tune writes one)");
  AttentionTuning t;
  t.source = path;
  for (auto [key, out] : {std::pair<const char*, std::string*>{"arch", &t.arch},
                          {"device_name", &t.device_name},
                          {"timer", &t.timer}}) {
    TDA_CHECK(j.contains(key) && j.at(key).is_string(),
              path + ": \"" + key + "\" must be a string");
    *out = j.at(key).get<std::string>();
  }
  TDA_CHECK(t.arch.rfind("sm_", 0) == 0, path + ": \"arch\" must be sm_XY, got \"" + t.arch + "\"");
  TDA_CHECK(j.contains("entries") && j.at("entries").is_array(),
            path + ": \"entries\" must be an array");
  const json& es = j.at("entries");
  for (size_t i = 0; i < es.size(); ++i) {
    const std::string where = path + ": entries[" + std::to_string(i) + "]";
    TuningEntry e = parse_entry(es[i], where);
    for (const auto& o : t.entries)
      TDA_CHECK(
          !(o.kind == e.kind && o.Dqk == e.Dqk && o.Dv == e.Dv && o.T == e.T && o.pass == e.pass),
          where + " repeats an earlier entry's (kind, head_dims, T, pass)");
    t.entries.push_back(std::move(e));
  }
  return t;
}

std::string AttentionTuning::default_path(const std::string& arch) {
  return std::string(TDA_SOURCE_DIR) + "/kernels/tuning/" + arch + ".json";
}

json AttentionTuning::to_json() const {
  json es = json::array();
  for (const auto& e : entries)
    es.push_back({{"kind", e.kind},
                  {"head_dims", {e.Dqk, e.Dv}},
                  {"T", e.T},
                  {"pass", e.pass},
                  {"choice", e.choice},
                  {"ms", e.ms}});
  return {{"format", kFormat},
          {"arch", arch},
          {"device_name", device_name},
          {"timer", timer},
          {"entries", es}};
}

void AttentionTuning::save(const std::string& path) const {
  write_file_durable(path, to_json().dump(1) + "\n");
}

const TuningEntry* AttentionTuning::find(const std::string& kind, int Dqk, int Dv, int T,
                                         const std::string& pass) const {
  const TuningEntry* best = nullptr;
  double best_d = 0;
  for (const auto& e : entries) {
    if (e.kind != kind || e.Dqk != Dqk || e.Dv != Dv || e.pass != pass) continue;
    const double d = std::fabs(std::log2(double(e.T)) - std::log2(double(T)));
    if (!best || d < best_d || (d == best_d && e.T > best->T)) {
      best = &e;
      best_d = d;
    }
  }
  return best;
}

AttnFwdShape AttentionTuning::fwd_shape(const std::string& kind, int Dqk, int Dv, int T) const {
  const TuningEntry* e = find(kind, Dqk, Dv, T, "forward");
  return e ? parse_fwd_shape(e->choice) : AttnFwdShape{0, 0};
}

AttnBwdShape AttentionTuning::bwd_shape(const std::string& kind, int Dqk, int Dv, int T,
                                        bool atomic_ok) const {
  AttnBwdShape best{atomic_ok, 1};
  const TuningEntry* e = find(kind, Dqk, Dv, T, "backward");
  if (!e) return best;
  double best_ms = -1;
  for (const auto& name : tuning_shapes("backward")) {  // a tie: the first listed
    const AttnBwdShape s = parse_bwd_shape(name);
    if ((s.atomic && !atomic_ok) || !e->ms.contains(name)) continue;
    const double ms = e->ms.at(name).get<double>();
    if (best_ms < 0 || ms < best_ms) best = s, best_ms = ms;
  }
  return best;
}

}  // namespace tda
