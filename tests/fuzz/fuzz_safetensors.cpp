// The safetensors reader (src/core/safetensors.h): header length, JSON header, dtypes, shapes,
// data offsets, metadata; then every tensor it accepted is read back.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/safetensors.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tda_fuzz::expect_clean([&] {
    tda::SafetensorsFile f(std::vector<char>(data, data + size), "fuzz.safetensors");
    for (const auto& name : f.names()) {
      const auto shape = f.shape(name);
      uint64_t n = 1;
      for (int64_t d : shape) n *= uint64_t(d);
      if (n > (uint64_t(1) << 26)) continue;  // accepted only if the data is there: bounded below
      std::vector<float> dst(n);
      f.read_into(name, shape, dst.data());
    }
    for (const auto& kv : f.metadata()) (void)kv;
  });
  return 0;
}
