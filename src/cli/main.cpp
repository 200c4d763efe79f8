// tda: one binary, one subcommand per file in this folder. Errors a user can fix are reported
// as a single line on stderr with a non-zero exit.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "cli/command.h"
#include "core/error.h"

namespace tda {
std::map<std::string, Command>& commands() {
  static std::map<std::string, Command> c;
  return c;
}
}  // namespace tda

static void usage() {
  std::fprintf(stderr, "usage: tda <command> [options]   (tda <command> --help)\n\ncommands:\n");
  for (const auto& kv : tda::commands())
    std::fprintf(stderr, "  %-10s %s\n", kv.first.c_str(), kv.second.help.c_str());
}

int main(int argc, char** argv) {
  // OpenMP's default spin-waiting after each parallel region steals the cores from OpenBLAS's
  // own threads between GEMMs (measured: d12 B=4 T=64 step 7.1 s -> 5.6 s with passive waits).
  // libgomp reads the policy when it loads, before main, so set it and re-execute once; a user's
  // explicit OMP_WAIT_POLICY is left alone.
  if (!std::getenv("OMP_WAIT_POLICY")) {
    ::setenv("OMP_WAIT_POLICY", "passive", 1);
    ::execv("/proc/self/exe", argv);  // returns only on failure: then run as we are
  }
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    usage();
    return argc < 2 ? 2 : 0;
  }
  auto it = tda::commands().find(argv[1]);
  if (it == tda::commands().end()) {
    std::fprintf(stderr, "tda: unknown command '%s'\n", argv[1]);
    usage();
    return 2;
  }
  std::string prog = std::string("tda ") + argv[1];
  argv[1] = const_cast<char*>(prog.c_str());
  try {
    return it->second.run(argc - 1, argv + 1);
  } catch (const tda::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
