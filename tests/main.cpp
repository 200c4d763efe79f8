// Tests run from the source tree so relative paths in configs (data/...) resolve as they do
// for a user running ./build/tda from the repository root.
#define CATCH_CONFIG_RUNNER
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "backend/cpu/cpu_ops.h"
#include "test_kinds.h"

int main(int argc, char** argv) {
  // As the tda binary does (cpu_ops.h says why): ctest -j2 runs two OpenMP processes on the same
  // cores, and OpenBLAS may not know this CPU.
  tda::reexec_with_cpu_runtime_env(argv);
  if (::chdir(TDA_SOURCE_DIR) != 0) return 2;
  // Every emulated CUDA test runs in the emulator's strict mode (docs/emulator.md), and so does
  // every tda process a test starts; TDA_EMU_STRICT=0 in the environment turns it off.
  ::setenv("TDA_EMU_STRICT", "1", 0);
  tda::register_per_kind_tests();  // one test case per registered attention kind
  return Catch::Session().run(argc, argv);
}
