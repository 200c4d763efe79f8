// What every config-driven command (train, the benchmarks) parses first: `--config FILE`,
// repeatable `--set key.path=value` and `--help`, registered by the command itself.
#pragma once
#include <cxxopts.hpp>
#include <iostream>
#include <string>
#include <vector>

namespace tda {

// Parses argv into *r. On --help, or without --config, prints the help and returns false with
// the exit code in *code (0 for --help, 2 for a missing --config).
inline bool parse_config_command(cxxopts::Options& opts, int argc, char** argv,
                                 cxxopts::ParseResult* r, int* code) {
  *r = opts.parse(argc, argv);
  if (!r->count("help") && r->count("config")) return true;
  std::cout << opts.help() << "\n";
  *code = r->count("help") ? 0 : 2;
  return false;
}

// The --set values, in the order given (a later one wins).
inline std::vector<std::string> set_flags(const cxxopts::ParseResult& r) {
  return r.count("set") ? r["set"].as<std::vector<std::string>>() : std::vector<std::string>{};
}

}  // namespace tda
