// Tests run from the source tree so relative paths in configs (data/...) resolve as they do
// for a user running ./build/tda from the repository root.
#define CATCH_CONFIG_RUNNER
#include <unistd.h>

#include <catch2/catch.hpp>

int main(int argc, char** argv) {
  if (::chdir(TDA_SOURCE_DIR) != 0) return 2;
  return Catch::Session().run(argc, argv);
}
