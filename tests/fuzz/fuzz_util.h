// Shared by the libFuzzer targets (tests/fuzz/README.md). The contract every reader keeps on
// bad input: return, or throw tda::Error (a message naming the file, key or offset). Anything
// else is a finding: a crash or sanitizer report, or any other exception (a bare JSON-library
// or std::stoi message), which abort() turns into a libFuzzer crash with the input saved.
// The targets never write files or start processes.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "core/error.h"

namespace tda_fuzz {

template <class F>
void expect_clean(F&& f) {
  try {
    f();
  } catch (const tda::Error& e) {
    // The CLI prints it on one line, whatever bytes from the input it quotes (cli/main.cpp).
    if (std::string(e.what()).empty()) {
      std::fprintf(stderr, "tda::Error without a message\n");
      std::abort();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "not a tda::Error: %s\n", e.what());
    std::abort();
  }
}

// Splits the input at the first occurrence of `sep` (libFuzzer's dictionary-free way of
// feeding a target two inputs). No separator: all of it is the first part.
inline void split2(const std::string& in, const std::string& sep, std::string* a, std::string* b) {
  const size_t k = in.find(sep);
  *a = in.substr(0, k);
  *b = k == std::string::npos ? std::string() : in.substr(k + sep.size());
}

}  // namespace tda_fuzz
