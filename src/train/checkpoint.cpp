#include "train/checkpoint.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/fault.h"
#include "core/fs.h"
#include "core/safetensors.h"

namespace tda {

namespace fs = std::filesystem;

std::string checkpoint_dir_name(int step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08d", step);
  return buf;
}

namespace {

// step_NNNNNNNN exactly: `step_00000006.corrupt` and other names are not checkpoints.
bool is_step_name(const std::string& name) {
  if (name.size() != 13 || name.compare(0, 5, "step_") != 0) return false;
  return std::all_of(name.begin() + 5, name.end(), [](char c) { return std::isdigit(uint8_t(c)); });
}

// Hidden names of in-flight directories: ".step_N.tmp" (being written), ".step_N.trash" (being
// deleted). Returns the step name, or "" for anything else.
std::string hidden_step(const std::string& name, const std::string& suffix) {
  if (name.size() < suffix.size() + 1 || name[0] != '.' ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return "";
  std::string step = name.substr(1, name.size() - 1 - suffix.size());
  return is_step_name(step) ? step : "";
}

// Renames `dir` to its hidden trash name, then deletes it, biggest file first (frees the most
// space soonest). A kill at any point leaves either the intact directory or a trash directory.
void remove_checkpoint_dir(const fs::path& dir) {
  const fs::path trash = dir.parent_path() / ("." + dir.filename().string() + ".trash");
  remove_tree(trash.string());
  std::error_code ec;
  fs::rename(dir, trash, ec);
  TDA_CHECK(!ec, dir.string() + ": cannot move aside for deletion: " + ec.message());
  fsync_dir(dir.parent_path().string());
  fault_point("prune.renamed");
  fs::remove(trash / "model.safetensors", ec);
  fault_point("prune.partial");
  remove_tree(trash.string());
}

// Moves a damaged or incomplete checkpoint out of the way of pruning, re-saving and the next
// --resume auto, never deleting it: `step_N.corrupt` (`.corrupt2`, ... when taken). Returns the
// new name, or "" with *why set when the rename failed.
std::string move_aside(const std::string& dir, std::string* why) {
  std::string aside = dir + ".corrupt";
  for (int i = 2; fs::exists(aside); ++i) aside = dir + ".corrupt" + std::to_string(i);
  std::error_code ec;
  fs::rename(dir, aside, ec);
  if (ec) {
    *why = ec.message();
    return "";
  }
  fsync_dir(fs::path(dir).parent_path().string());
  return aside;
}

// A checkpoint file that is not there makes the checkpoint incomplete, which --resume auto
// treats like a damaged one (skipped and kept), not like a reason to stop.
void require_file(const std::string& path) {
  if (!fs::exists(path)) throw CorruptFile(path + ": missing (an incomplete checkpoint)");
}

std::vector<TensorRef> refs(const GPT2& model, const float* base, const std::string& suffix) {
  std::vector<TensorRef> r;
  for (const auto& t : model.tensors()) r.push_back({t.name + suffix, t.shape, base + t.offset});
  return r;
}

// The file must hold exactly `want` (a missing one is named before an extra one, so another
// attention kind reads as a missing tensor rather than as the first shape that differs).
void check_tensor_set(const SafetensorsFile& f, const std::string& file,
                      const std::set<std::string>& want, const std::string& context) {
  for (const auto& name : want)
    TDA_CHECK(f.has(name), context + file + " has no tensor '" + name +
                               "' (another attention kind or n_layer?)");
  for (const auto& name : f.names())
    TDA_CHECK(want.count(name), context + file + " holds tensor '" + name +
                                    "' that this model does not have (another attention kind or "
                                    "n_layer?)");
}

std::set<std::string> names_of(const GPT2& model, const std::vector<std::string>& suffixes) {
  std::set<std::string> r;
  for (const auto& t : model.tensors())
    for (const auto& s : suffixes) r.insert(t.name + s);
  return r;
}

void note_unverified(const SafetensorsFile& f, const std::string& file) {
  if (!f.checksummed())
    spdlog::warn("{}: no checksums (written by an older tda): loaded without verification", file);
}

}  // namespace

void save_checkpoint(const std::string& dir, const GPT2& model,
                     const std::vector<StateBuffer>& state, const TrainState& st) {
  fs::path final_dir(dir);
  fs::path tmp = final_dir.parent_path() / ("." + final_dir.filename().string() + ".tmp");
  remove_tree(tmp.string());
  make_dirs(tmp.string());
  const std::vector<float> params = model.params_to_host();  // device -> host on CUDA
  write_safetensors((tmp / "model.safetensors").string(), refs(model, params.data(), ""),
                    {{"format", "pt"}, {"producer", "tda"}});
  fault_point("ckpt.model");
  std::vector<TensorRef> opt;
  for (const auto& s : state)
    for (auto& r : refs(model, s.data, "." + s.name)) opt.push_back(r);
  write_safetensors((tmp / "optimizer.safetensors").string(), opt,
                    {{"step", std::to_string(st.step)}});
  fault_point("ckpt.optimizer");
  json s = {
      {"step", st.step},
      {"loader",
       {{"epoch", st.loader.epoch}, {"shard", st.loader.shard}, {"cursor", st.loader.cursor}}},
      {"last_train_loss", st.last_train_loss},
      {"last_val_loss", st.last_val_loss},
      {"config", st.config}};
  write_file_durable((tmp / "state.json").string(), s.dump(2));
  fsync_dir(tmp.string());
  fault_point("ckpt.complete");
  // Re-saving a step: the old directory goes to trash first (rename cannot replace a non-empty
  // directory); killed in between, cleanup_checkpoints() renames the complete tmp into place.
  if (fs::exists(final_dir)) remove_checkpoint_dir(final_dir);
  std::error_code ec;
  fs::rename(tmp, final_dir, ec);
  TDA_CHECK(!ec, dir + ": cannot rename checkpoint into place: " + ec.message());
  fsync_dir(final_dir.parent_path().string());
  fault_point("ckpt.renamed");
}

TrainState read_checkpoint_state(const std::string& dir) {
  std::string path = dir + "/state.json";
  std::ifstream f(path);
  TDA_CHECK(f.good(), path + ": missing (not a complete checkpoint directory)");
  std::stringstream ss;
  ss << f.rdbuf();
  json s;
  try {
    s = parse_json_document(ss.str(), path);
  } catch (const Error& e) {
    throw CorruptFile(e.what());
  }
  try {
    TrainState st;
    st.step = s.at("step").get<int>();
    st.loader.epoch = s.at("loader").at("epoch").get<int64_t>();
    st.loader.shard = s.at("loader").at("shard").get<int64_t>();
    st.loader.cursor = s.at("loader").at("cursor").get<int64_t>();
    st.last_train_loss = s.value("last_train_loss", 0.0);
    st.last_val_loss = s.value("last_val_loss", -1.0);
    st.config = s.at("config");
    return st;
  } catch (const json::exception& e) {
    throw CorruptFile(path + ": malformed: " + e.what());
  }
}

TrainState load_checkpoint(const std::string& dir, GPT2& model,
                           const std::vector<StateBuffer>& state) {
  TrainState st = read_checkpoint_state(dir);
  const std::string mfile = dir + "/model.safetensors";
  require_file(mfile);
  SafetensorsFile mf(mfile);
  check_tensor_set(mf, mfile, names_of(model, {""}), "");
  note_unverified(mf, mfile);
  std::vector<float> params(model.flat_size(), 0.f);
  for (const auto& t : model.tensors()) mf.read_into(t.name, t.shape, params.data() + t.offset);
  if (!state.empty()) {
    const std::string ofile = dir + "/optimizer.safetensors";
    require_file(ofile);
    SafetensorsFile of(ofile);
    std::vector<std::string> suffixes;
    for (const auto& s : state) suffixes.push_back("." + s.name);
    check_tensor_set(of, ofile, names_of(model, suffixes), "");
    note_unverified(of, ofile);
    for (const auto& t : model.tensors())
      for (const auto& s : state) of.read_into(t.name + "." + s.name, t.shape, s.data + t.offset);
  }
  model.params_from_host(params.data());  // only once everything has been read and verified
  return st;
}

std::string load_weights_strict(const std::string& path, GPT2& model) {
  std::string dir = path;
  if (!fs::exists(fs::path(path) / "model.safetensors")) dir = latest_checkpoint(path);
  TDA_CHECK(!dir.empty(), "train.init_from '" + path +
                              "': neither a checkpoint directory (model.safetensors) nor a run "
                              "directory with a complete checkpoint");
  const std::string file = dir + "/model.safetensors";
  SafetensorsFile mf(file);
  check_tensor_set(mf, file, names_of(model, {""}), "train.init_from: ");
  note_unverified(mf, file);
  std::vector<float> params(model.flat_size(), 0.f);  // host copy, uploaded to the backend
  for (const auto& t : model.tensors()) {
    try {
      mf.read_into(t.name, t.shape, params.data() + t.offset);
    } catch (const Error& e) {
      throw Error(std::string("train.init_from: ") + e.what());
    }
  }
  model.params_from_host(params.data());
  return dir;
}

std::vector<std::string> complete_checkpoints(const std::string& run_dir) {
  std::vector<std::string> r;
  fs::path root = fs::path(run_dir) / "checkpoints";
  if (!fs::exists(root)) return r;
  for (const auto& e : fs::directory_iterator(root)) {
    std::string name = e.path().filename().string();
    if (e.is_directory() && is_step_name(name) && fs::exists(e.path() / "state.json"))
      r.push_back(e.path().string());
  }
  std::sort(r.begin(), r.end());  // zero-padded step numbers sort chronologically
  return r;
}

std::string latest_checkpoint(const std::string& run_dir) {
  auto all = complete_checkpoints(run_dir);
  return all.empty() ? std::string() : all.back();
}

void prune_checkpoints(const std::string& run_dir, int keep) {
  if (keep <= 0) return;
  auto all = complete_checkpoints(run_dir);
  for (size_t i = 0; i + size_t(keep) < all.size(); ++i) remove_checkpoint_dir(all[i]);
}

std::vector<std::string> cleanup_checkpoints(const std::string& run_dir) {
  std::vector<std::string> done;
  const fs::path root = fs::path(run_dir) / "checkpoints";
  if (!fs::is_directory(root)) return done;
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory()) entries.push_back(e.path());
  std::sort(entries.begin(), entries.end());
  for (const auto& p : entries) {
    const std::string name = p.filename().string();
    if (std::string step = hidden_step(name, ".tmp"); !step.empty()) {
      // state.json is written last and durably: with it, the tmp directory is complete.
      if (fs::exists(p / "state.json") && !fs::exists(root / step)) {
        std::error_code ec;
        fs::rename(p, root / step, ec);
        TDA_CHECK(!ec, p.string() + ": cannot rename into place: " + ec.message());
        done.push_back("finished an interrupted checkpoint write: " + (root / step).string());
      } else {
        remove_tree(p.string());
        done.push_back("removed an unfinished checkpoint write: " + p.string());
      }
    } else if (!hidden_step(name, ".trash").empty()) {
      remove_tree(p.string());
      done.push_back("removed an interrupted checkpoint deletion: " + p.string());
    } else if (is_step_name(name) && !fs::exists(p / "state.json")) {
      // Incomplete (an older tda pruned in place; a user deleted a file): its other files may
      // well pass their checksums, so it is kept aside, never deleted, unless it is empty.
      if (fs::is_empty(p)) {
        remove_tree(p.string());
        done.push_back("removed an empty checkpoint directory: " + p.string());
        continue;
      }
      std::string why;
      const std::string aside = move_aside(p.string(), &why);
      TDA_CHECK(!aside.empty(), p.string() +
                                    ": incomplete (no state.json) and cannot be moved "
                                    "aside: " +
                                    why);
      done.push_back("INCOMPLETE CHECKPOINT " + p.string() +
                     " (no state.json): not resumable; kept as " + aside);
    }
  }
  if (!done.empty()) fsync_dir(root.string());
  return done;
}

std::string model_config_differences(const json& saved, const json& current) {
  // Keys that only set initial values (the checkpoint's tensors replace them on resume), and the
  // attention keys that pick the code that computes the same model (attention_code_keys).
  static const std::set<std::string> init_only = [] {
    std::set<std::string> s = {"attention.lambda_init", "attention.ssmax_s_init"};
    for (const auto& key : attention_code_keys()) s.insert("attention." + key);
    return s;
  }();
  const json& defaults = config_defaults();
  auto value = [&](const json& cfg, const std::string& sec, const std::string& key) {
    if (cfg.contains(sec) && cfg[sec].contains(key)) return cfg[sec][key];
    return defaults[sec][key];  // a key added after the checkpoint was written
  };
  auto learned_beta = [&](const json& cfg) {
    return value(cfg, "attention", "learn_beta") == true;
  };
  std::string diff;
  for (const std::string sec : {"model", "attention"}) {
    for (auto it = defaults[sec].begin(); it != defaults[sec].end(); ++it) {
      const std::string path = sec + "." + it.key();
      if (init_only.count(path)) continue;
      // A learned beta is a tensor; attention.beta is then only its initial value.
      if (path == "attention.beta" && learned_beta(saved) && learned_beta(current)) continue;
      const json a = value(saved, sec, it.key()), b = value(current, sec, it.key());
      if (a == b) continue;
      diff += std::string(diff.empty() ? "" : "; ") + path + ": checkpoint " + a.dump() +
              ", this run " + b.dump();
    }
  }
  return diff;
}

ResumeResult resume_checkpoint(const std::string& resume, const std::string& run_dir,
                               const json& config, GPT2& model,
                               const std::vector<StateBuffer>& state) {
  std::vector<std::string> candidates;
  if (resume == "auto") {
    candidates = complete_checkpoints(run_dir);
    std::reverse(candidates.begin(), candidates.end());  // newest first
  } else if (!resume.empty()) {
    candidates = {resume};
  }
  std::vector<std::string> corrupt;
  for (const auto& dir : candidates) {
    try {
      const TrainState saved = read_checkpoint_state(dir);
      const std::string diff = model_config_differences(saved.config, config);
      TDA_CHECK(diff.empty(), "--resume: " + dir + " holds another model than this run's config: " +
                                  diff + " (resume needs the same model: use the checkpoint's " +
                                  "config, or a fresh --out)");
      return {dir, load_checkpoint(dir, model, state)};
    } catch (const CorruptFile& e) {
      if (resume != "auto") throw;
      std::string why;
      const std::string aside = move_aside(dir, &why);
      spdlog::error(
          "CORRUPT CHECKPOINT {}: {}; skipped{}; falling back to the previous one", dir, e.what(),
          aside.empty() ? " (could not move it aside: " + why + ")" : " and kept as " + aside);
      corrupt.push_back(dir);
    }
  }
  if (!corrupt.empty()) {
    std::string list;
    for (const auto& c : corrupt) list += (list.empty() ? "" : ", ") + c;
    throw Error("--resume auto: every checkpoint in " + run_dir + "/checkpoints is corrupt (" +
                list + "); they are kept as <name>.corrupt: inspect them, or start a fresh --out");
  }
  return {};
}

}  // namespace tda
