// tda report SWEEP_DIR [--out DIR]
// The paper's tables and figures from a sweep directory (docs/report.md). The report itself is
// scripts/report.py (tables, and figures with matplotlib); this command finds a Python and
// replaces itself with it, arguments passed through. Python: $TDA_PYTHON, ./.venv/bin/python,
// the source tree's .venv/bin/python, then python3 on PATH.
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "core/error.h"
#include "distributed/launch.h"

namespace tda {
namespace {

bool executable(const std::string& p) {
  return !p.empty() && ::access(p.c_str(), X_OK) == 0;
}

std::string find_python() {
  if (const char* env = std::getenv("TDA_PYTHON")) {
    TDA_CHECK(executable(env), std::string("report: TDA_PYTHON=") + env + " is not executable");
    return env;
  }
  for (const std::string& p :
       {std::string("./.venv/bin/python"), std::string(TDA_SOURCE_DIR) + "/.venv/bin/python"})
    if (executable(p)) return p;
  std::istringstream path(std::getenv("PATH") ? std::getenv("PATH") : "");
  for (std::string dir; std::getline(path, dir, ':');)
    if (executable(dir + "/python3")) return dir + "/python3";
  throw Error(
      "report: no Python found (set TDA_PYTHON, or make .venv with scripts/setup.sh); "
      "matplotlib draws the figures");
}

int cmd_report(int argc, char** argv) {
  const std::string script = std::string(TDA_SOURCE_DIR) + "/scripts/report.py";
  TDA_CHECK(::access(script.c_str(), R_OK) == 0, "report: " + script + " not found");
  std::string python = find_python();
  std::vector<char*> args{python.data(), const_cast<char*>(script.c_str())};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  // report.py asks this binary for the attention kinds' order and labels (`tda kinds --json`).
  ::setenv("TDA_BINARY", self_exe().c_str(), 1);
  std::cout.flush();
  ::execv(python.c_str(), args.data());
  throw Error("report: cannot run " + python + " (errno " + std::to_string(errno) + ")");
}

RegisterCommand reg("report", "tables and figures of a sweep directory (scripts/report.py)",
                    cmd_report);

}  // namespace
}  // namespace tda
