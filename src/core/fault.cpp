#include "core/fault.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

namespace tda {

namespace {
struct Fault {
  std::string site;
  long hit = 0;  // 0: no fault configured
  std::atomic<long> seen{0};
  Fault() {
    const char* env = std::getenv("TDA_FAULT");
    if (!env) return;
    const char* colon = std::strrchr(env, ':');
    site.assign(env, colon ? size_t(colon - env) : std::strlen(env));
    hit = colon ? std::strtol(colon + 1, nullptr, 10) : 1;
  }
};
}  // namespace

void fault_point(const char* site) {
  static Fault f;
  if (f.hit <= 0 || f.site != site) return;
  if (f.seen.fetch_add(1) + 1 == f.hit) ::kill(::getpid(), SIGKILL);
}

}  // namespace tda
