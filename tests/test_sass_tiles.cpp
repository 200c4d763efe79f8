// scripts/bench/sass_tiles.py (instructions per 64x64 attention tile, from SASS) on a made-up
// listing whose counts are worked out by hand: the loop finding (dominance, not layout; a loop
// left by CALL.REL.NOINC), the trip counts of inner loops, the per-tile scaling, and the error on
// a loop it cannot count. The real kernels' table needs cuobjdump and build-cuda (docs/perf.md).
#include <catch2/catch.hpp>
#include <string>

#include "core/config.h"  // json
#include "test_util.h"

namespace tda {

namespace {
const std::string kScript = "python3 " TDA_SOURCE_DIR "/scripts/bench/sass_tiles.py";
const std::string kFixture = TDA_SOURCE_DIR "/tests/data/sass_tiles_fixture.sass";
}  // namespace

TEST_CASE("sass_tiles: per-tile counts of a key loop with a tile load and an HMMA loop inside",
          "[bench]") {
  if (run_command("command -v python3") != 0) TDA_SKIP("needs python3");
  std::string out;
  REQUIRE(run_command(kScript + " --sass " + kFixture + " --kernel _Z4demov --json", &out) == 0);
  const json rows = json::parse(out);
  // One key loop, header 0x20, six blocks; the jump from the setup at 0x1e0 back to 0x20 is not a
  // loop (0x20 does not dominate it), and without CALL.REL.NOINC as a jump 0x190 is unreachable
  // (its target, 0x180, is a NOP: the jump lands on the next instruction, as ptxas lays it out).
  REQUIRE(rows.size() == 1);
  CHECK(rows[0]["loop"] == "20+6");
  CHECK(rows[0]["arch"] == "80");
  // Per warp and pass: own code (2 BAR, CALL, BRA; LDSM; HMMA; MUFU; IADD3), the load loop 8 times
  // (32 loads per thread per 64-wide tile / 4 per pass: 4 LDG, F2FP, 2 STS, IADD3, ISETP, BRA) and
  // the HMMA loop twice (LDSM, 1.5 mma units, FMUL, BRA). Four warps, one tile per pass: x4.
  const json& t = rows[0]["per_tile"];
  CHECK(t["mma"] == 16.0);
  CHECK(t["lds"] == 12.0);
  CHECK(t["sts"] == 64.0);
  CHECK(t["ldg"] == 128.0);
  CHECK(t["cvt"] == 32.0);
  CHECK(t["fp32"] == 8.0);
  CHECK(t["mufu"] == 4.0);
  CHECK(t["ctrl"] == 56.0);
  CHECK(t["int"] == 68.0);
  CHECK(rows[0]["total"] == 388.0);
  CHECK(rows[0]["per_mma"] == Approx(388.0 / 16.0));
  // Another implementation's shape: 8 warps, four 64x64 tiles per pass: x2 per warp-pass.
  REQUIRE(
      run_command(kScript + " --sass " + kFixture + " --kernel _Z4demov --warps 8 --tiles 4 --json",
                  &out) == 0);
  CHECK(json::parse(out)[0]["total"] == 194.0);
}

TEST_CASE("sass_tiles: an inner loop with no known trip count is an error until one is given",
          "[bench]") {
  if (run_command("command -v python3") != 0) TDA_SKIP("needs python3");
  std::string out;
  CHECK(run_command(kScript + " --sass " + kFixture + " --kernel _Z7unknownv", &out) != 0);
  CHECK(out.find("loop 50+1") != std::string::npos);
  CHECK(out.find("--trips 50+1=N") != std::string::npos);
  REQUIRE(
      run_command(kScript + " --sass " + kFixture + " --kernel _Z7unknownv --trips 50+1=3 --json",
                  &out) == 0);
  // BAR, LDG, STS, HMMA, the branch back; 3 x (FMUL, BRA); four warps
  CHECK(json::parse(out)[0]["total"] == 4.0 * (5 + 3 * 2));
}

}  // namespace tda
