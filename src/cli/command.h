// Subcommands of the single `tda` binary register themselves here (one file per subcommand),
// so adding one touches no other file.
#pragma once
#include <functional>
#include <map>
#include <string>

namespace tda {

struct Command {
  std::string help;
  std::function<int(int, char**)> run;  // argv[0] is "tda <name>"
};

std::map<std::string, Command>& commands();

struct RegisterCommand {
  RegisterCommand(const std::string& name, const std::string& help, std::function<int(int, char**)> fn) {
    commands()[name] = Command{help, std::move(fn)};
  }
};

}  // namespace tda
