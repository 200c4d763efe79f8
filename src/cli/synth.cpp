// tda synth --config FILE [--kinds a,b] [--seeds 1,2,3] [--multiples 1,2,4,8,16]
//           [--sequences N] [--out DIR] [--overwrite] [--set key=value ...]
// Long-context retrieval on a laptop (docs/synth.md): trains every registered attention kind (or
// --kinds) on the config's synthetic task (data.synthetic, data/synthetic.h) at model.seq_len,
// then measures exact-match accuracy on fresh test sequences at each multiple of that length,
// with the trained RoPE and with NTK-aware RoPE scaled by the multiple (model/rope.h), once per
// training seed. Each run is DIR/<kind>/seed<S> (config, metrics, final checkpoint); the
// accuracies, per seed and over the seeds, go to DIR/results.json and DIR/results.csv
// (scripts/plot_synth.py plots them). DIR defaults to
// runs/<config folder>/<config name>-synth.
#include "eval/synth.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cxxopts.hpp>
#include <fstream>
#include <iostream>
#include <numeric>

#include "attention/registry.h"
#include "cli/command.h"
#include "cli/config_flags.h"
#include "core/config.h"
#include "core/error.h"
#include "core/fs.h"
#include "train/trainer.h"

namespace tda {
namespace {

std::vector<std::string> pick_kinds(const std::string& flag) {
  std::vector<std::string> all;
  for (const auto& [name, kind] : attention_registry()) all.push_back(name);
  if (flag.empty()) return all;
  const std::vector<std::string> picked = split_list(flag);
  for (const auto& k : picked)
    TDA_CHECK(attention_registry().count(k),
              "synth: --kinds names '" + k + "', which is not a registered kind (tda kinds)");
  TDA_CHECK(!picked.empty(), "synth: --kinds is empty");
  return picked;
}

// Per (length, RoPE), the accuracies of a kind's seeds: their mean (accuracy,
// sequence_accuracy), sample standard deviation (0 for one seed), smallest and largest, so a
// difference between kinds can be read against the spread between seeds.
json over_seeds(const json& runs) {
  json evals = json::array();
  const json& first = runs.at(0).at("evals");
  for (size_t i = 0; i < first.size(); ++i) {
    std::vector<double> acc, seq;
    for (const auto& run : runs) {
      acc.push_back(run.at("evals").at(i).at("accuracy").get<double>());
      seq.push_back(run.at("evals").at(i).at("sequence_accuracy").get<double>());
    }
    const double n = double(acc.size());
    auto mean = [n](const std::vector<double>& v) {
      return std::accumulate(v.begin(), v.end(), 0.0) / n;
    };
    const double m = mean(acc);
    double ss = 0;
    for (double a : acc) ss += (a - m) * (a - m);
    json e = first[i];
    e.erase("seconds");
    e["seeds"] = acc.size();
    e["accuracy"] = m;
    e["accuracy_sd"] = acc.size() > 1 ? std::sqrt(ss / (n - 1)) : 0.0;
    e["accuracy_min"] = *std::min_element(acc.begin(), acc.end());
    e["accuracy_max"] = *std::max_element(acc.begin(), acc.end());
    e["sequence_accuracy"] = mean(seq);
    evals.push_back(e);
  }
  return evals;
}

// The diagnostics of a kind's seeds, per length: the mean of each statistic.
json diag_over_seeds(const json& runs) {
  json out = json::array();
  const json& first = runs.at(0).at("diag");
  for (size_t i = 0; i < first.size(); ++i) {
    json d = first[i];
    for (auto& [key, value] : d.items()) {
      if (key == "length" || key == "multiple" || key == "ntk_factor" || key == "sequences" ||
          !value.is_number())
        continue;
      double sum = 0;
      for (const auto& run : runs) sum += run.at("diag").at(i).at(key).get<double>();
      value = sum / double(runs.size());
    }
    d["seeds"] = runs.size();
    out.push_back(d);
  }
  return out;
}

int cmd_synth(int argc, char** argv) {
  cxxopts::Options opts(argv[0],
                        "Train every attention kind on a synthetic retrieval task at a short "
                        "length; test exact-match accuracy far past it");
  opts.add_options()("c,config", "JSON config with data.synthetic.task set",
                     cxxopts::value<std::string>())(
      "o,out", "results directory, one run per kind in it (default: runs/<folder>/<name>-synth)",
      cxxopts::value<std::string>()->default_value(""))(
      "kinds", "comma-separated kinds (default: every registered kind)",
      cxxopts::value<std::string>()->default_value(""))(
      "multiples", "test lengths as multiples of model.seq_len",
      cxxopts::value<std::string>()->default_value("1,2,4,8,16"))(
      "sequences", "test sequences per length", cxxopts::value<int>()->default_value("100"))(
      "diag-sequences",
      "test sequences of the attention diagnostics at 1x and the longest multiple (0: none)",
      cxxopts::value<int>()->default_value("8"))(
      "seeds", "comma-separated training seeds, one run per kind and seed (default: train.seed)",
      cxxopts::value<std::string>()->default_value(""))(
      "overwrite", "replace runs already in --out")("set", "override a config key (repeatable)",
                                                    cxxopts::value<std::vector<std::string>>())(
      "h,help", "show help");
  cxxopts::ParseResult r;
  int code = 0;
  if (!parse_config_command(opts, argc, argv, &r, &code)) return code;
  const std::string config_path = r["config"].as<std::string>();
  const std::vector<std::string> sets = set_flags(r);
  const std::vector<int> multiples =
      parse_positive_ints(r["multiples"].as<std::string>(), "synth: --multiples");
  const std::vector<std::string> kinds = pick_kinds(r["kinds"].as<std::string>());
  const int sequences = r["sequences"].as<int>();
  TDA_CHECK(sequences >= 1, "synth: --sequences must be >= 1, got " + std::to_string(sequences));
  const int diag_sequences = r["diag-sequences"].as<int>();
  TDA_CHECK(diag_sequences >= 0,
            "synth: --diag-sequences must be >= 0, got " + std::to_string(diag_sequences));
  std::string out = r["out"].as<std::string>();
  if (out.empty()) out = default_run_dir(config_path) + "-synth";  // beside `tda train`'s run
  std::vector<unsigned long long> seeds;
  {  // the config as given must name a task: checked before any kind trains
    const Config c = load_config(config_path, sets);
    TDA_CHECK(!c.data.synthetic.task.empty(),
              "synth: " + config_path + " sets no data.synthetic.task (mqar, mqar_noisy, needles)");
    const std::string flag = r["seeds"].as<std::string>();
    if (flag.empty())
      seeds.push_back(c.train.seed);
    else
      for (int s : parse_positive_ints(flag, "synth: --seeds")) seeds.push_back(s);
  }
  make_dirs(out);

  json results = {
      {"config", config_path}, {"sets", sets}, {"seeds", seeds}, {"kinds", json::array()}};
  std::ofstream csv(out + "/results.csv");
  TDA_CHECK(csv.good(), "synth: cannot write " + out + "/results.csv");
  csv << "kind,seed,train_length,length,multiple,rope,ntk_factor,accuracy,sequence_accuracy,"
         "answers,sequences\n";
  for (const auto& kind : kinds) {
    json row = {{"kind", kind},
                {"label", attention_registry().at(kind).info.label},
                {"runs", json::array()}};
    for (const unsigned long long seed : seeds) {
      std::vector<std::string> run_sets = sets;
      run_sets.push_back("attention.kind=" + kind);
      run_sets.push_back("train.seed=" + std::to_string(seed));
      const Config cfg = load_config(config_path, run_sets);
      if (results.find("task") == results.end()) results["task"] = cfg.raw["data"]["synthetic"];
      TrainOptions to;
      to.out_dir = out + "/" + kind + "/seed" + std::to_string(seed);
      to.overwrite = r.count("overwrite") > 0;
      spdlog::info("synth: training {} (seed {}) on {} at length {}", kind, seed,
                   cfg.data.synthetic.task, cfg.model.seq_len);
      const auto t0 = std::chrono::steady_clock::now();
      Trainer trainer(cfg, to);
      trainer.run();
      // An interrupt (Ctrl-C, SIGTERM) ends the run early with a checkpoint: the command stops
      // there, rather than go on to the next run as if this one had finished.
      TDA_CHECK(trainer.step() >= cfg.train.max_steps,
                "synth: interrupted while training " + kind + " (seed " + std::to_string(seed) +
                    ") at step " + std::to_string(trainer.step()) + "; its checkpoint is in " +
                    to.out_dir + "; " + out + "/results.json holds the kinds finished before");
      const double train_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      json run = {{"seed", seed},
                  {"steps", trainer.step()},
                  {"train_seconds", train_s},
                  {"val_loss", trainer.val_history().empty() ? json(nullptr)
                                                             : json(trainer.val_history().back())},
                  {"evals", json::array()}};
      const int L = cfg.model.seq_len;
      for (int mult : multiples) {
        // NTK-aware scaling by the multiple, beside the trained RoPE; at 1x they are the same.
        for (const bool ntk : {false, true}) {
          if (ntk && mult == 1) continue;
          const double factor = ntk ? cfg.model.rope_ntk_factor * mult : cfg.model.rope_ntk_factor;
          const auto e0 = std::chrono::steady_clock::now();
          const SynthAccuracy a =
              synthetic_accuracy(trainer.model(), cfg, L * mult, factor, sequences);
          const double eval_s =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - e0).count();
          const char* rope = ntk ? "ntk" : "trained";
          spdlog::info(
              "synth: {} seed {} length {} ({}x, {} rope) accuracy {:.3f}, sequences {:.3f}", kind,
              seed, a.length, mult, rope, a.accuracy(), a.sequence_accuracy());
          run["evals"].push_back({{"length", a.length},
                                  {"multiple", mult},
                                  {"rope", rope},
                                  {"ntk_factor", factor},
                                  {"accuracy", a.accuracy()},
                                  {"sequence_accuracy", a.sequence_accuracy()},
                                  {"answers", a.answers},
                                  {"sequences", a.sequences},
                                  {"seconds", eval_s}});
          csv << kind << ',' << seed << ',' << L << ',' << a.length << ',' << mult << ',' << rope
              << ',' << fmt_num(factor) << ',' << fmt_num(a.accuracy()) << ','
              << fmt_num(a.sequence_accuracy()) << ',' << a.answers << ',' << a.sequences << '\n';
          csv.flush();
        }
      }
      // The attention maps on the task's own test sequences: at the trained length and at the
      // longest tested one (trained RoPE), where sinks and dispersion would show.
      run["diag"] = json::array();
      std::vector<int> diag_multiples;
      if (diag_sequences > 0) diag_multiples = {1};
      const int longest = *std::max_element(multiples.begin(), multiples.end());
      if (diag_sequences > 0 && longest > 1) diag_multiples.push_back(longest);
      for (const int mult : diag_multiples) {
        json d = synthetic_diagnostics(trainer.model(), cfg, L * mult, cfg.model.rope_ntk_factor,
                                       diag_sequences);
        d["multiple"] = mult;
        spdlog::info(
            "synth: {} seed {} length {} diagnostics: sparsity {:.3f}, gSinkRatio "
            "{:.3f}, survivors per row {:.2f}",
            kind, seed, L * mult, d["sparsity"].get<double>(), d["gsink0"].get<double>(),
            d["mean_survivors"].get<double>());
        run["diag"].push_back(d);
      }
      row["runs"].push_back(run);
    }
    row["evals"] = over_seeds(row["runs"]);
    row["diag"] = diag_over_seeds(row["runs"]);
    results["kinds"].push_back(row);
    // Written after every kind, so a long run that is stopped keeps what it measured.
    write_file_durable(out + "/results.json", results.dump(2) + "\n");
  }
  std::cout << out << "/results.json\n";
  return 0;
}

const RegisterCommand reg("synth",
                          "train every kind on a synthetic retrieval task, test it at longer "
                          "lengths",
                          cmd_synth);

}  // namespace
}  // namespace tda
