// tda synth --config FILE [--kinds a,b] [--multiples 1,2,4,8,16] [--sequences N] [--out DIR]
//           [--overwrite] [--set key=value ...]
// Long-context retrieval on a laptop (docs/synth.md): trains every registered attention kind (or
// --kinds) on the config's synthetic task (data.synthetic, data/synthetic.h) at model.seq_len,
// then measures exact-match accuracy on fresh test sequences at each multiple of that length,
// with the trained RoPE and with NTK-aware RoPE scaled by the multiple (model/rope.h). Each
// kind's run is DIR/<kind> (config, metrics, final checkpoint); the accuracies go to
// DIR/results.json and DIR/results.csv (scripts/plot_synth.py plots them). DIR defaults to
// runs/<config folder>/<config name>-synth.
#include "eval/synth.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cxxopts.hpp>
#include <fstream>
#include <iostream>

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
  std::string out = r["out"].as<std::string>();
  if (out.empty()) out = default_run_dir(config_path) + "-synth";  // beside `tda train`'s run
  {  // the config as given must name a task: checked before any kind trains
    const Config c = load_config(config_path, sets);
    TDA_CHECK(!c.data.synthetic.task.empty(),
              "synth: " + config_path + " sets no data.synthetic.task (mqar, mqar_noisy, needles)");
  }
  make_dirs(out);

  json results = {{"config", config_path}, {"sets", sets}, {"kinds", json::array()}};
  std::ofstream csv(out + "/results.csv");
  TDA_CHECK(csv.good(), "synth: cannot write " + out + "/results.csv");
  csv << "kind,train_length,length,multiple,rope,ntk_factor,accuracy,sequence_accuracy,answers,"
         "sequences\n";
  for (const auto& kind : kinds) {
    std::vector<std::string> kind_sets = sets;
    kind_sets.push_back("attention.kind=" + kind);
    const Config cfg = load_config(config_path, kind_sets);
    if (results.find("task") == results.end()) results["task"] = cfg.raw["data"]["synthetic"];
    TrainOptions to;
    to.out_dir = out + "/" + kind;
    to.overwrite = r.count("overwrite") > 0;
    spdlog::info("synth: training {} on {} at length {}", kind, cfg.data.synthetic.task,
                 cfg.model.seq_len);
    const auto t0 = std::chrono::steady_clock::now();
    Trainer trainer(cfg, to);
    trainer.run();
    const double train_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    json row = {{"kind", kind},
                {"label", attention_registry().at(kind).info.label},
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
        spdlog::info("synth: {} length {} ({}x, {} rope) accuracy {:.3f}, sequences {:.3f}", kind,
                     a.length, mult, rope, a.accuracy(), a.sequence_accuracy());
        row["evals"].push_back({{"length", a.length},
                                {"multiple", mult},
                                {"rope", rope},
                                {"ntk_factor", factor},
                                {"accuracy", a.accuracy()},
                                {"sequence_accuracy", a.sequence_accuracy()},
                                {"answers", a.answers},
                                {"sequences", a.sequences},
                                {"seconds", eval_s}});
        csv << kind << ',' << L << ',' << a.length << ',' << mult << ',' << rope << ','
            << fmt_num(factor) << ',' << fmt_num(a.accuracy()) << ','
            << fmt_num(a.sequence_accuracy()) << ',' << a.answers << ',' << a.sequences << '\n';
        csv.flush();
      }
    }
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
