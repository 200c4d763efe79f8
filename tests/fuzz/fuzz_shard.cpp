// llm.c token shards (src/data/shard.h): header checks, size, token ids against the vocabulary.
#include <cstddef>
#include <cstdint>

#include "data/shard.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tda_fuzz::expect_clean([&] {
    // A small vocabulary too, so that the id check fails on some inputs and passes on others.
    for (int vocab : {50257, 300}) {
      const auto t = tda::parse_shard(reinterpret_cast<const char*>(data), size, "fuzz.bin", vocab);
      for (uint16_t x : t)
        if (x >= vocab) __builtin_trap();  // parse_shard promised every id < vocab
    }
  });
  return 0;
}
