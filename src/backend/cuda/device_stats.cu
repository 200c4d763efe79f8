// device_stats.h over the emulator's counters and memory budget; kernels are named as launch<>
// names them (emu/strict.h's kernel_name), without namespaces.
#include "backend/cuda/device_stats.h"

#if defined(__CUDACC__)

namespace tda::cuda {

EmulatedDevice* emulated_device() {
  return nullptr;
}

}  // namespace tda::cuda

#else

#include "backend/cuda/runtime.h"

namespace tda::cuda {

namespace {

// "ns::(anonymous namespace)::k<ns::P, 1>" -> "k<ns::P, 1>": the name without its qualifiers
// (the last "::" outside every <> and ()).
std::string short_name(const std::string& s) {
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    depth += s[i] == '<' || s[i] == '(' ? 1 : s[i] == '>' || s[i] == ')' ? -1 : 0;
    if (depth == 0 && s[i] == ':' && s[i + 1] == ':') start = i + 2;
  }
  return s.substr(start);
}

LaunchRecord to_record(const emu::LaunchShape& s) {
  LaunchRecord r;
  if (!s.kernel) return r;
  r.kernel = short_name(*s.kernel);
  r.grid[0] = s.grid.x, r.grid[1] = s.grid.y, r.grid[2] = s.grid.z;
  r.block[0] = s.block.x, r.block[1] = s.block.y, r.block[2] = s.block.z;
  r.shmem = s.shmem;
  return r;
}

class Emulator final : public EmulatedDevice {
 public:
  DeviceStats stats() override;
  void set_dry_run(bool on) override { emu::set_dry_run(on); }
  void set_memory_cap(size_t bytes) override { emu::set_device_memory_cap(bytes); }
  void reset_peaks() override {
    emu::reset_memory_peak();
    emu::reset_launch_records();
  }
};

DeviceStats Emulator::stats() {
  const emu::Counters c = emu::counters();
  const emu::MemoryStats m = emu::memory_stats();
  DeviceStats s;
  s.launches = c.launches;
  s.invalid_launches = c.invalid_launches;
  s.gemms = c.gemms;
  s.gemm_epilogues = c.gemm_epilogues;
  s.uploads = c.uploads;
  s.downloads = c.downloads;
  s.device_copies = c.device_copies;
  s.memsets = c.memsets;
  s.synchronize_calls = c.synchronize_calls;
  s.host_syncs = c.host_syncs();
  s.allocations = m.allocations;
  s.frees = m.frees;
  s.cap_bytes = m.cap;
  s.live_bytes = m.live;
  s.peak_bytes = m.peak;
  s.at_peak = m.at_peak;
  s.largest = to_record(c.largest);
  s.max_y = to_record(c.max_y);
  s.max_z = to_record(c.max_z);
  s.last = to_record(c.last);
  for (const std::string* k : c.kernels)
    if (k) s.kernels.insert(*k);
  return s;
}

}  // namespace

EmulatedDevice* emulated_device() {
  static Emulator e;
  return &e;
}

}  // namespace tda::cuda

#endif
