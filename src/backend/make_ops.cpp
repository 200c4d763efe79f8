#include "backend/make_ops.h"

#include <map>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace tda {

namespace {
std::map<std::string, OpsFactory>& backends() {
  static std::map<std::string, OpsFactory> b{{"cpu", [] { return std::make_unique<CpuOps>(); }}};
  return b;
}
}  // namespace

bool register_backend(const std::string& device, OpsFactory make) {
  backends()[device] = std::move(make);
  return true;
}

std::unique_ptr<Ops> make_ops(const std::string& device, int threads) {
  auto it = backends().find(device);
  if (it == backends().end()) {
    std::string have;
    for (const auto& [name, f] : backends()) have += (have.empty() ? "" : ", ") + name;
    throw Error("device \"" + device + "\": this binary has no such backend (it has: " + have +
                ")");
  }
  if (threads > 0) set_cpu_threads(threads);
  return it->second();
}

}  // namespace tda
