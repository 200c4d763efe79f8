// Subcommands of the single `tda` binary register themselves here (one file per subcommand),
// so adding one touches no other file.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tda {

struct Command {
  std::string help;
  std::function<int(int, char**)> run;  // argv[0] is "tda <name>"
};

std::map<std::string, Command>& commands();

struct RegisterCommand {
  RegisterCommand(const std::string& name, const std::string& help,
                  std::function<int(int, char**)> fn) {
    commands()[name] = Command{help, std::move(fn)};
  }
};

// "a,b,,c" -> {"a", "b", "c"}: a flag's comma-separated list, empty items dropped.
inline std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t a = 0;
  while (a <= s.size()) {
    size_t b = s.find(',', a);
    if (b == std::string::npos) b = s.size();
    if (b > a) out.push_back(s.substr(a, b - a));
    a = b + 1;
  }
  return out;
}

// cxxopts takes no one-letter long options (`--T` would be a syntax error): rewrite argv so a
// documented spelling like `--T` reaches the option registered as `to` (e.g. "--lengths").
inline void alias_flag(int argc, char** argv, const char* from, const char* to) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == from) argv[i] = const_cast<char*>(to);
}

}  // namespace tda
