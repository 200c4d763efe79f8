#include "sweep/gpus.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "core/error.h"

namespace tda {

std::vector<std::string> node_gpus() {
  std::vector<std::string> visible;
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  if (v && *v) {
    std::stringstream ss(v);
    for (std::string id; std::getline(ss, id, ',');)
      if (!id.empty()) visible.push_back(id);
  }
  if (const char* fake = std::getenv("TDA_SWEEP_GPUS"); fake && *fake) {
    char* end = nullptr;
    const long n = std::strtol(fake, &end, 10);
    TDA_CHECK(*end == '\0' && n >= 0 && n <= 4096,
              std::string("TDA_SWEEP_GPUS must be a GPU count, got \"") + fake + "\"");
    std::vector<std::string> ids;
    for (long i = 0; i < n; ++i)
      ids.push_back(size_t(i) < visible.size() ? visible[size_t(i)] : std::to_string(i));
    return ids;
  }
  if (v) return visible;  // set, even empty: the user's choice of GPUs (none)
  std::vector<std::string> ids;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/driver/nvidia/gpus", ec), end;
       !ec && it != end; it.increment(ec))
    ids.push_back(std::to_string(ids.size()));
  return ids;
}

std::vector<std::string> slot_gpus(const std::vector<std::string>& node, int slot, int parallel,
                                   int gpus_per_run) {
  if (node.empty()) return {};
  const int n = int(node.size());
  const int width = std::max({gpus_per_run, 1, n / std::max(1, parallel)});
  std::vector<std::string> out;
  for (int g = 0; g < width; ++g) out.push_back(node[size_t((slot * width + g) % n)]);
  // A share larger than the node (--gpus 8 on 4 GPUs) names each GPU once; training then fails
  // with its own message.
  std::vector<std::string> seen;
  for (const auto& id : out)
    if (std::find(seen.begin(), seen.end(), id) == seen.end()) seen.push_back(id);
  return seen;
}

std::string join_gpus(const std::vector<std::string>& gpus) {
  std::string s;
  for (const auto& g : gpus) s += (s.empty() ? "" : ",") + g;
  return s;
}

}  // namespace tda
