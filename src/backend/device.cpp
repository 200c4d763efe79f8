#include "backend/device.h"

#include <chrono>
#include <fstream>

#include "core/host_memory.h"

namespace tda {

DeviceStats DeviceStats::since(const DeviceStats& b) const {
  DeviceStats d = *this;
  d.launches -= b.launches;
  d.invalid_launches -= b.invalid_launches;
  d.gemms -= b.gemms;
  d.gemm_epilogues -= b.gemm_epilogues;
  d.uploads -= b.uploads;
  d.downloads -= b.downloads;
  d.device_copies -= b.device_copies;
  d.memsets -= b.memsets;
  d.synchronize_calls -= b.synchronize_calls;
  d.host_syncs -= b.host_syncs;
  d.allocations -= b.allocations;
  d.frees -= b.frees;
  return d;
}

namespace {

class HostTimer final : public DeviceTimer {
 public:
  void start() override { t0_ = std::chrono::steady_clock::now(); }
  void stop() override { t1_ = std::chrono::steady_clock::now(); }
  double ms() override { return std::chrono::duration<double, std::milli>(t1_ - t0_).count(); }

 private:
  std::chrono::steady_clock::time_point t0_, t1_;
};

class HostDevice final : public Device {
 public:
  std::string name() const override {
    // Linux: the first "model name" line of /proc/cpuinfo.
    std::ifstream f("/proc/cpuinfo");
    for (std::string line; std::getline(f, line);) {
      if (line.rfind("model name", 0) != 0) continue;
      const size_t colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
    }
    return "cpu";
  }
  std::string clock() const override { return "host clock"; }
  bool timed() const override { return true; }
  std::unique_ptr<DeviceTimer> timer() override { return std::make_unique<HostTimer>(); }
  size_t memory_used() const override { return 0; }
  size_t memory_free() const override { return available_host_memory().bytes; }
  void synchronize() override {}
};

}  // namespace

Device& host_device() {
  static HostDevice d;
  return d;
}

}  // namespace tda
