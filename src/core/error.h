// One error type for everything a user can get wrong (config, data, checkpoints).
// The CLI prints what() as a single line and exits non-zero.
#pragma once
#include <stdexcept>
#include <string>

namespace tda {

struct Error : std::runtime_error {
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// TDA_CHECK(cond, msg-expression): throws tda::Error(msg) when cond is false.
#define TDA_CHECK(cond, msg)                              \
  do {                                                    \
    if (!(cond)) throw ::tda::Error(std::string() + msg); \
  } while (0)

}  // namespace tda
