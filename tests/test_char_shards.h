// Character-level tiny shakespeare shards for the tests that train: the bytes of input.txt (all
// ASCII) as tokens, a real text with a 128-token vocabulary, so emulated LM heads and the
// models stay small (the BPE shards need a 50304-wide head: ~3 s per emulated step). 64 KiB of
// train, 8 KiB of val; written once per test process into a temporary directory.
#pragma once
#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "data/shard.h"
#include "test_util.h"

namespace tda {

inline const std::string& char_shards() {
  static TempDir dir;
  static const bool written = [] {
    std::ifstream f(source_dir() + "/data/tinyshakespeare/input.txt", std::ios::binary);
    std::vector<char> text(72 * 1024);
    f.read(text.data(), std::streamsize(text.size()));
    REQUIRE(size_t(f.gcount()) == text.size());
    std::vector<uint16_t> t(text.begin(), text.end());
    REQUIRE(*std::max_element(t.begin(), t.end()) < 128);
    write_shard(dir.path + "/train.bin", t.data(), 64 * 1024);
    write_shard(dir.path + "/val.bin", t.data() + 64 * 1024, 8 * 1024);
    return true;
  }();
  (void)written;
  return dir.path;
}

}  // namespace tda
