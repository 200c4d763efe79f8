// `tda eval <name>` subcommands register themselves here (one file each, like top-level
// commands): eval.cpp dispatches `tda eval NAME ...` to the entry registered as NAME.
#pragma once
#include <functional>
#include <map>
#include <string>

#include "cli/command.h"

namespace tda {

std::map<std::string, Command>& eval_commands();  // defined in eval.cpp

struct RegisterEvalCommand {
  RegisterEvalCommand(const std::string& name, const std::string& help,
                      std::function<int(int, char**)> fn) {
    eval_commands()[name] = Command{help, std::move(fn)};
  }
};

}  // namespace tda
