// Small helpers shared by the tests.
#pragma once
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

// A test that cannot run on this machine (no ../shared, no GPU, a Python package missing)
// says why and returns: ctest reports it as "Skipped", not "Passed", through the
// SKIP_REGULAR_EXPRESSION set on the discovered tests (CMakeLists.txt). Only for skipping a
// whole test case: a skip after a failed check would hide the failure.
#define TDA_SKIP(why)             \
  do {                            \
    WARN("TDA_SKIPPED: " << why); \
    return;                       \
  } while (0)

namespace tda {

// The JSON lines of a command's output (lines starting with '{'; log lines are skipped).
inline std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] == '{') out.push_back(nlohmann::json::parse(line));
  return out;
}

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/tda_test_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

inline void write_text(const std::string& path, const std::string& s) {
  std::ofstream(path) << s;
}

inline std::string source_dir() {
  return TDA_SOURCE_DIR;
}

// Sets (value non-null) or unsets an environment variable for a scope, then puts it back.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      had_ = true;
      old_ = old;
    }
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      ::setenv(name_.c_str(), old_.c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

// Runs a shell command; returns the exit code, stdout+stderr in *out.
inline int run_command(const std::string& command, std::string* out = nullptr) {
  std::string cmd = command + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string o;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) o.append(buf, n);
  int st = ::pclose(p);
  if (out) *out = o;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

// Runs the tda binary with arguments; returns the exit code, stdout+stderr in *out.
inline int run_tda(const std::string& args, std::string* out = nullptr) {
  return run_command(std::string(TDA_BINARY) + " " + args, out);
}

}  // namespace tda
