#include "backend/peak_flops.h"

namespace tda {

const std::vector<PeakFlops>& peak_flops_table() {
  // Longer names first: "H100" is also a part of "H100 PCIe", and "H200" of "GH200".
  static const std::vector<PeakFlops> table = {
      {"H100 PCIe", 756.0, 51.0}, {"H100 NVL", 835.0, 60.0}, {"H100", 989.0, 67.0},
      {"GH200", 989.0, 67.0},     {"H200", 989.0, 67.0},     {"A100", 312.0, 19.5},
  };
  return table;
}

double peak_tflops(const std::string& device_name, const std::string& dtype) {
  for (const auto& p : peak_flops_table())
    if (device_name.find(p.name_part) != std::string::npos)
      return dtype == "bf16" ? p.bf16_tflops : p.fp32_tflops;
  return 0.0;
}

}  // namespace tda
