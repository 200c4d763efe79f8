// Subcommands of the single `tda` binary register themselves here (one file per subcommand),
// so adding one touches no other file.
#pragma once
#include <exception>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"

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

// "64,128" -> {64, 128}: a flag's list of positive integers. An item that is not one (an empty
// item included) or an empty list is one line naming `what` (e.g. "synth: --multiples").
inline std::vector<int> parse_positive_ints(const std::string& s, const std::string& what) {
  std::vector<int> v;
  size_t a = 0;
  while (!s.empty() && a <= s.size()) {
    size_t b = s.find(',', a);
    if (b == std::string::npos) b = s.size();
    const std::string item = s.substr(a, b - a);
    size_t used = 0;
    int x = 0;
    try {
      x = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    TDA_CHECK(used == item.size() && !item.empty() && x > 0,
              what + " item '" + item + "' is not a positive integer");
    v.push_back(x);
    a = b + 1;
  }
  TDA_CHECK(!v.empty(), what + " is empty");
  return v;
}

// cxxopts takes no one-letter long options (`--T` would be a syntax error): rewrite argv so a
// documented spelling like `--T` reaches the option registered as `to` (e.g. "--lengths").
inline void alias_flag(int argc, char** argv, const char* from, const char* to) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == from) argv[i] = const_cast<char*>(to);
}

}  // namespace tda
