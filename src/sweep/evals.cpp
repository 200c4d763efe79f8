#include "sweep/evals.h"

#include <fstream>

#include "core/error.h"
#include "core/fs.h"
#include "data/shard.h"
#include "eval/mc_data.h"

namespace tda {

std::string eval_file(const std::string& run_dir, const std::string& name) {
  return run_dir + "/eval/" + name + ".json";
}

namespace {

bool readable(const std::string& p) {
  return std::ifstream(p).good();
}

std::string join(const json& list) {
  std::string s;
  for (const auto& x : list) s += (s.empty() ? "" : ",") + x.dump();
  return s;
}

// The first validation shard and its token count ("" when data.val matches nothing).
std::pair<std::string, size_t> val_shard(const Config& cfg, std::string* why) {
  try {
    const std::string f = glob_paths(cfg.data.val, "data.val").front();
    return {f, read_shard_header(f)};
  } catch (const Error& e) {
    *why = e.what();
    return {"", 0};
  }
}

// Why a task's files are not there ("" when they are), as eval mc would look for them.
std::string mc_missing(const std::string& task, bool arc_fix) {
  const std::string path = mc_default_path(task);
  if (!readable(path)) return "no " + task + " data at " + path;
  if (task == "piqa" && !readable(path.substr(0, path.rfind('/')) + "/valid-labels.lst"))
    return "no PIQA labels (valid-labels.lst) beside " + path;
  if (arc_fix && (task == "arc_easy" || task == "arc_challenge")) {
    const std::string base = path.substr(0, path.rfind('/'));
    const std::string keys =
        base.substr(0, base.rfind('/')) + "/aristo_answer_keys/" + task + "_test_answers.jsonl";
    if (!readable(keys))
      return "no ARC answer key at " + keys + " (eval.mc.arc_fix false scores MosaicML's labels)";
  }
  return "";
}

}  // namespace

std::vector<EvalStep> plan_evals(const SweepRun& run, const json& ev, const std::string& ck) {
  std::vector<EvalStep> steps;
  const Config& cfg = run.cfg;
  const std::vector<std::string> dev = {"--device", ev["device"].get<std::string>(), "--dtype",
                                        ev["dtype"].get<std::string>()};
  auto add = [&](const std::string& name, std::vector<std::string> args, std::string skip) {
    args.insert(args.end(), {"--checkpoint", ck});
    args.insert(args.end(), dev.begin(), dev.end());
    steps.push_back({name, std::move(args), std::move(skip)});
  };
  auto on = [&](const char* block) {
    return ev[block]["enabled"].get<bool>() && eval_applies(ev[block], run.group);
  };
  const bool gpt2_vocab = cfg.model.real_vocab_size >= 50257;
  const std::string not_gpt2 = "the model's vocabulary (" +
                               std::to_string(cfg.model.real_vocab_size) +
                               " tokens) is not GPT-2's: text evaluations need it";
  const int T = cfg.model.seq_len;

  if (on("val")) {
    const json& v = ev["val"];
    add("val", {"eval", "val", "--sequences", std::to_string(v["sequences"].get<long>())}, "");
  }
  if (on("mc")) {
    const json& m = ev["mc"];
    for (const auto& t : m["tasks"]) {
      const std::string task = t.get<std::string>();
      std::vector<std::string> a = {"eval", "mc", "--task", task, "--quiet"};
      if (m["limit"].get<int>() > 0)
        a.insert(a.end(), {"--limit", std::to_string(m["limit"].get<int>())});
      if (!m["arc_fix"].get<bool>()) a.push_back("--no-arc-fix");
      add("mc_" + task, a, gpt2_vocab ? mc_missing(task, m["arc_fix"].get<bool>()) : not_gpt2);
    }
  }
  if (on("diag")) {
    const json& d = ev["diag"];
    std::string why;
    const auto [shard, tokens] = val_shard(cfg, &why);
    auto diag = [&](const std::string& name, int len, int want, bool untrained) {
      const long fit = long(tokens / size_t(len));
      std::vector<std::string> a = {"diag",
                                    "--tokens-file",
                                    shard,
                                    "--T",
                                    std::to_string(len),
                                    "--sequences",
                                    std::to_string(std::min<long>(want, fit))};
      if (len > T) a.insert(a.end(), {"--max-context", std::to_string(len)});
      if (untrained) a.push_back("--untrained");
      std::string skip = shard.empty() ? why : "";
      if (skip.empty() && fit < 1)
        skip = shard + " holds " + std::to_string(tokens) + " tokens, fewer than one sequence of " +
               std::to_string(len);
      add(name, a, skip);
    };
    diag("diag", T, d["sequences"].get<int>(), false);
    if (d["untrained"].get<bool>()) diag("diag_init", T, d["sequences"].get<int>(), true);
    if (d["long_factor"].get<int>() > 1)
      diag("diag_long", T * d["long_factor"].get<int>(), d["long_sequences"].get<int>(), false);
  }
  if (on("passkey")) {
    const json& p = ev["passkey"];
    for (const auto& k : p["needles"])
      add("passkey_n" + k.dump(),
          {"eval", "passkey", "--lengths", join(p["lengths"]), "--trials", p["trials"].dump(),
           "--needles", k.dump(), "--quiet"},
          gpt2_vocab ? "" : not_gpt2);
  }
  if (on("scrolls")) {
    const json& s = ev["scrolls"];
    const std::string dir = s["data"].get<std::string>();
    for (const auto& t : s["tasks"]) {
      const std::string task = t.get<std::string>(), file = dir + "/" + task + "/validation.jsonl";
      std::vector<std::string> a = {
          "eval",   "longctx", "--task",           task,
          "--data", file,      "--max-new-tokens", s["max_new_tokens"].dump(),
          "--quiet"};
      if (s["limit"].get<int>() > 0) a.insert(a.end(), {"--limit", s["limit"].dump()});
      if (s["max_context"].get<int>() > 0)
        a.insert(a.end(), {"--max-context", s["max_context"].dump()});
      std::string skip = !gpt2_vocab   ? not_gpt2
                         : dir.empty() ? "no SCROLLS data (eval.scrolls.data or --scrolls-data DIR)"
                         : !readable(file) ? "no " + task + " data at " + file
                                           : "";
      add("scrolls_" + task, a, skip);
    }
  }
  return steps;
}

}  // namespace tda
