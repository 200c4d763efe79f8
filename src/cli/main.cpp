// tda: one binary, one subcommand per file in this folder. Errors a user can fix are reported
// as a single line on stderr with a non-zero exit.
#include <spdlog/sinks/ansicolor_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "backend/cpu/cpu_ops.h"
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

// spdlog colours the log when stdout is a terminal. Ranks under mpirun write into mpirun's
// pseudo-terminals even when the user's output is a pipe or a file, so `--procs` passes its own
// answer down in TDA_COLOR (0/1); NO_COLOR (no-color.org) turns colour off everywhere.
static void choose_log_colours() {
  const char* no = std::getenv("NO_COLOR");
  const char* tda = std::getenv("TDA_COLOR");
  const bool off = (no && *no) || (tda && std::string(tda) == "0");
  const bool on = !off && tda && std::string(tda) == "1";
  if (!off && !on) return;  // spdlog's own choice: colour on a terminal only
  for (auto& sink : spdlog::default_logger()->sinks())
    if (auto* c = dynamic_cast<spdlog::sinks::ansicolor_stdout_sink_mt*>(sink.get()))
      c->set_color_mode(on ? spdlog::color_mode::always : spdlog::color_mode::never);
}

// An error is one line, even when it quotes a key or value from a user's file that holds a
// line break or another control character (shown as \n, \xNN).
static std::string one_line(const std::string& m) {
  std::string r;
  for (unsigned char c : m) {
    if (c == '\n') {
      r += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      r += b;
    } else {
      r += char(c);
    }
  }
  return r;
}

int main(int argc, char** argv) {
  tda::reexec_with_cpu_runtime_env(argv);  // backend/cpu/cpu_ops.h says why
  choose_log_colours();
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
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", one_line(e.what()).c_str());
    return 1;
  }
}
