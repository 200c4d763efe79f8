// How much memory this process may still take on the host before the kernel refuses it or,
// worse, lets it have it and then sends the OOM killer (Linux overcommits: a huge allocation
// succeeds and the process dies when it touches the pages, rc 137, taking a shared node under
// memory pressure with it). Commands that size buffers from user input ask here first
// (backend/memory_check.h).
#pragma once
#include <cstddef>
#include <string>

namespace tda {

struct HostMemory {
  size_t bytes = 0;   // the smallest of the bounds below
  std::string bound;  // which one: "MemAvailable", "ulimit -v", "cgroup memory limit"
};

// The minimum of: MemAvailable (/proc/meminfo: free memory plus what the kernel can reclaim),
// the address space left under RLIMIT_AS (`ulimit -v`: the limit less VmSize), and the memory
// cgroup's limit less its working set (usage less inactive file cache; cgroup v2 or v1, the
// process's own group and its parents). A bound that cannot be read is left out.
HostMemory available_host_memory();

// This process's resident memory now and at its most (VmRSS and VmHWM of /proc/self/status);
// 0 where the file does not say.
struct ProcessMemory {
  size_t rss = 0, peak_rss = 0;
};
ProcessMemory process_memory();

}  // namespace tda
