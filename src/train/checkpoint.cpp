#include "train/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/fs.h"
#include "core/safetensors.h"

namespace tda {

namespace fs = std::filesystem;

std::string checkpoint_dir_name(int step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08d", step);
  return buf;
}

static std::vector<TensorRef> refs(const GPT2& model, const float* base, const std::string& suffix) {
  std::vector<TensorRef> r;
  for (const auto& t : model.tensors()) r.push_back({t.name + suffix, t.shape, base + t.offset});
  return r;
}

void save_checkpoint(const std::string& dir, const GPT2& model, const float* m, const float* v,
                     const TrainState& st) {
  fs::path final_dir(dir);
  fs::path tmp = final_dir.parent_path() / ("." + final_dir.filename().string() + ".tmp");
  remove_tree(tmp.string());
  make_dirs(tmp.string());
  const std::vector<float> params = model.params_to_host();  // device -> host on CUDA
  write_safetensors((tmp / "model.safetensors").string(), refs(model, params.data(), ""),
                    {{"format", "pt"}, {"producer", "tda"}});
  std::vector<TensorRef> opt = refs(model, m, ".exp_avg");
  for (auto& r : refs(model, v, ".exp_avg_sq")) opt.push_back(r);
  write_safetensors((tmp / "optimizer.safetensors").string(), opt, {{"step", std::to_string(st.step)}});
  json s = {{"step", st.step},
            {"loader", {{"epoch", st.loader.epoch}, {"shard", st.loader.shard}, {"cursor", st.loader.cursor}}},
            {"last_train_loss", st.last_train_loss},
            {"last_val_loss", st.last_val_loss},
            {"config", st.config}};
  write_file_durable((tmp / "state.json").string(), s.dump(2));
  fsync_dir(tmp.string());
  remove_tree(final_dir.string());  // only when re-saving the same step
  std::error_code ec;
  fs::rename(tmp, final_dir, ec);
  TDA_CHECK(!ec, dir + ": cannot rename checkpoint into place: " + ec.message());
  fsync_dir(final_dir.parent_path().string());
}

TrainState read_checkpoint_state(const std::string& dir) {
  std::string path = dir + "/state.json";
  std::ifstream f(path);
  TDA_CHECK(f.good(), path + ": missing (not a complete checkpoint directory)");
  std::stringstream ss;
  ss << f.rdbuf();
  json s;
  try {
    s = json::parse(ss.str());
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
    throw Error(path + ": malformed: " + e.what());
  }
}

TrainState load_checkpoint(const std::string& dir, GPT2& model, float* m, float* v) {
  TrainState st = read_checkpoint_state(dir);
  SafetensorsFile mf(dir + "/model.safetensors");
  std::vector<float> params(model.flat_size(), 0.f);
  for (const auto& t : model.tensors()) mf.read_into(t.name, t.shape, params.data() + t.offset);
  model.params_from_host(params.data());
  if (m && v) {
    SafetensorsFile of(dir + "/optimizer.safetensors");
    for (const auto& t : model.tensors()) {
      of.read_into(t.name + ".exp_avg", t.shape, m + t.offset);
      of.read_into(t.name + ".exp_avg_sq", t.shape, v + t.offset);
    }
  }
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
  // Names first, so that another attention kind reads as a missing/extra tensor rather than as
  // the first shape that happens to differ.
  for (const auto& t : model.tensors())
    TDA_CHECK(mf.has(t.name), "train.init_from: " + file + " has no tensor '" + t.name +
                                  "' (another attention kind or n_layer?)");
  for (const auto& name : mf.names()) {
    bool known = false;
    for (const auto& t : model.tensors()) known = known || t.name == name;
    TDA_CHECK(known, "train.init_from: " + file + " holds tensor '" + name +
                         "' that this model does not have (another attention kind or n_layer?)");
  }
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

static std::vector<std::string> complete_checkpoints(const std::string& run_dir) {
  std::vector<std::string> r;
  fs::path root = fs::path(run_dir) / "checkpoints";
  if (!fs::exists(root)) return r;
  for (const auto& e : fs::directory_iterator(root)) {
    std::string name = e.path().filename().string();
    if (e.is_directory() && name.rfind("step_", 0) == 0 && fs::exists(e.path() / "state.json"))
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
  for (size_t i = 0; i + size_t(keep) < all.size(); ++i) remove_tree(all[i]);
}

}  // namespace tda
