#include "core/host_memory.h"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

namespace tda {

namespace {

constexpr size_t kNone = std::numeric_limits<size_t>::max();

// "<key>: <n> kB" from a /proc file, in bytes; kNone when absent.
size_t proc_kb(const std::string& file, const std::string& key) {
  std::ifstream f(file);
  for (std::string line; std::getline(f, line);)
    if (line.compare(0, key.size() + 1, key + ":") == 0) {
      std::istringstream in(line.substr(key.size() + 1));
      size_t kb = 0;
      if (in >> kb) return kb * 1024;
    }
  return kNone;
}

// A number alone in a file ("max" and unreadable files: kNone).
size_t read_number(const std::string& file) {
  std::ifstream f(file);
  size_t n = 0;
  return (f >> n) ? n : kNone;
}

// "<key> <n>" in a cgroup's memory.stat; 0 when absent.
size_t stat_value(const std::string& file, const std::string& key) {
  std::ifstream f(file);
  std::string k;
  size_t v = 0;
  while (f >> k >> v)
    if (k == key) return v;
  return 0;
}

// The cgroup path of this process for a controller line of /proc/self/cgroup: "0::/a/b" (v2)
// or "4:memory:/a/b" (v1); "" when there is none.
std::string cgroup_path(bool v2) {
  std::ifstream f("/proc/self/cgroup");
  for (std::string line; std::getline(f, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string ctrl = line.substr(a + 1, b - a - 1);
    if ((v2 && line.compare(0, a, "0") == 0 && ctrl.empty()) ||
        (!v2 && (ctrl == "memory" || ctrl.find(",memory") != std::string::npos ||
                 ctrl.rfind("memory,", 0) == 0)))
      return line.substr(b + 1);
  }
  return "";
}

// Headroom under the memory cgroup limits of this process's group and its parents, as mounted
// here (inside a container the mount's root is the container's own group, so a path from
// /proc/self/cgroup that does not exist under it is tried at the root too).
size_t cgroup_headroom() {
  size_t best = kNone;
  for (const bool v2 : {true, false}) {
    const std::string root = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
    const std::string limit_file = v2 ? "memory.max" : "memory.limit_in_bytes";
    const std::string usage_file = v2 ? "memory.current" : "memory.usage_in_bytes";
    const std::string inactive = v2 ? "inactive_file" : "total_inactive_file";
    std::string path = cgroup_path(v2);
    if (path.empty()) continue;
    for (;;) {
      const std::string dir = root + (path == "/" ? "" : path);
      const size_t limit = read_number(dir + "/" + limit_file);
      // v1 writes "no limit" as a page-rounded 2^63.
      if (limit != kNone && limit < (size_t(1) << 60)) {
        size_t used = read_number(dir + "/" + usage_file);
        if (used != kNone) {
          const size_t cache = stat_value(dir + "/memory.stat", inactive);
          used = used > cache ? used - cache : 0;
          best = std::min(best, limit > used ? limit - used : 0);
        }
      }
      if (path.empty() || path == "/") break;
      const size_t slash = path.find_last_of('/');
      path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
    }
  }
  return best;
}

}  // namespace

HostMemory available_host_memory() {
  HostMemory m{kNone, ""};
  auto bound = [&](size_t bytes, const char* what) {
    if (bytes != kNone && bytes < m.bytes) m = {bytes, what};
  };
  bound(proc_kb("/proc/meminfo", "MemAvailable"), "MemAvailable");
  rlimit rl{};
  if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    const size_t used = proc_kb("/proc/self/status", "VmSize");
    if (used != kNone)
      bound(size_t(rl.rlim_cur) > used ? size_t(rl.rlim_cur) - used : 0, "ulimit -v");
  }
  bound(cgroup_headroom(), "cgroup memory limit");
  if (m.bound.empty()) m = {kNone, "unknown"};
  return m;
}

ProcessMemory process_memory() {
  auto bytes = [](const char* key) {
    const size_t b = proc_kb("/proc/self/status", key);
    return b == kNone ? size_t(0) : b;
  };
  return {bytes("VmRSS"), bytes("VmHWM")};
}

}  // namespace tda
