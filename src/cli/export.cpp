// tda export --checkpoint DIR --format hf --out DIR [--overwrite]
#include <cxxopts.hpp>
#include <iostream>

#include "cli/command.h"
#include "core/error.h"
#include "eval/export_hf.h"

namespace tda {
namespace {

int cmd_export(int argc, char** argv) {
  cxxopts::Options opts(argv[0], "Export a checkpoint (docs/evaluation.md)");
  opts.add_options()("checkpoint", "checkpoint directory", cxxopts::value<std::string>())(
      "format", "export format (hf)", cxxopts::value<std::string>()->default_value("hf"))(
      "out", "output directory (new or empty)", cxxopts::value<std::string>())(
      "overwrite", "replace the export already in --out (its files; others stay)")(
      "python-dir", "where modeling_tda.py lives",
      cxxopts::value<std::string>()->default_value(TDA_SOURCE_DIR "/python/tda_hf"))("h,help",
                                                                                     "show help");
  auto r = opts.parse(argc, argv);
  if (r.count("help") || !r.count("checkpoint") || !r.count("out")) {
    std::cout << opts.help() << "\n";
    return r.count("help") ? 0 : 2;
  }
  TDA_CHECK(r["format"].as<std::string>() == "hf",
            "export: unknown --format '" + r["format"].as<std::string>() + "' (only hf)");
  ExportOptions o;
  o.checkpoint = r["checkpoint"].as<std::string>();
  o.out = r["out"].as<std::string>();
  o.python_dir = r["python-dir"].as<std::string>();
  o.overwrite = r.count("overwrite") > 0;
  export_hf(o);
  std::cerr << "exported " << o.checkpoint << " -> " << o.out << "\n";
  return 0;
}

RegisterCommand reg("export", "export a checkpoint (Hugging Face format)", cmd_export);

}  // namespace
}  // namespace tda
