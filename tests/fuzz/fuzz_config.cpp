// The config loader (src/core/config.h): JSON text, then `--set key.path=value` overrides (one
// per line after a line "--set"), validated against the defaults table.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "core/config.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  std::string text, sets;
  tda_fuzz::split2(in, "\n--set\n", &text, &sets);
  std::vector<std::string> overrides;
  std::istringstream ss(sets);
  for (std::string l; std::getline(ss, l);) overrides.push_back(l);
  tda_fuzz::expect_clean([&] {
    const tda::Config c = tda::parse_config(text, overrides, "fuzz.json");
    // What it accepted must survive the trip through a checkpoint's state.json.
    (void)tda::config_from_json(c.raw, "fuzz state.json");
  });
  return 0;
}
