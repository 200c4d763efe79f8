// Sizes in messages: "14.58 GiB", "10.2 MiB".
#pragma once
#include <cstddef>
#include <cstdio>
#include <string>

namespace tda {

inline std::string size_text(size_t bytes) {
  char buf[32];
  if (bytes >= size_t(1) << 30)
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(size_t(1) << 30));
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(size_t(1) << 20));
  return buf;
}

}  // namespace tda
