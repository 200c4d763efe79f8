// Inputs that the fuzz targets (tests/fuzz) found, minimised, and their neighbours found while
// fixing them: each once crashed a reader, escaped it as something other than a tda::Error
// naming the file, or was accepted when it is wrong. The fuzzing record: tests/fuzz/README.md.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "core/safetensors.h"

using namespace tda;

namespace {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<char> bytes(const std::string& s) {
  return std::vector<char>(s.begin(), s.end());
}

}  // namespace

TEST_CASE("fuzz regressions: safetensors headers of the wrong shape", "[fuzz][badinput]") {
  // fuzz_safetensors, 10-byte header {"": ""}: was json type_error 306 (value() on a string).
  CHECK(error_of([] {
          // 8-byte length, then the 10-byte header (sizeof - 1: the literal's own NUL is not data).
          static const char file[] = "\x0a\0\0\0\0\0\0\0{\"\": \"\"}\0\0";
          SafetensorsFile f(bytes(std::string(file, sizeof file - 1)), "f.st");
        }) == "f.st: tensor '': entry is not an object");
  // was json out_of_range 403 (a missing data_offsets).
  const std::string h = R"({"a": {"dtype": "F32", "shape": [1]}})";
  CHECK(error_of([&] {
          SafetensorsFile f(
              bytes(std::string(1, char(h.size())) + std::string(7, '\0') + h + "abcd"), "f.st");
        }) == "f.st: tensor 'a': 'data_offsets' is not a list of two non-negative integers");
  // A shape whose element count overflows 64 bits passed the size check by wrapping to 0.
  const std::string big =
      R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})";
  CHECK(error_of([&] {
          SafetensorsFile f(bytes(std::string(1, char(big.size())) + std::string(7, '\0') + big),
                            "f.st");
        }) == "f.st: tensor 'a': 'shape' is too large");
  const std::string meta = R"({"__metadata__": {"step": 3}})";
  CHECK(error_of([&] {
          SafetensorsFile f(bytes(std::string(1, char(meta.size())) + std::string(7, '\0') + meta),
                            "f.st");
        }) == "f.st: __metadata__ 'step' is not a string");
}

TEST_CASE("fuzz regressions: a config value that is not UTF-8", "[fuzz][badinput][config]") {
  // fuzz_config, "{}" then "--set dist=\xc2": the error message's dump() of the value threw
  // json type_error 316 instead of naming the key.
  CHECK(error_of([] { parse_config("{}", {"dist=\xc2"}, "f.json"); }) ==
        "f.json: config key 'dist' must be object, got string (\"\xef\xbf\xbd\")");
}

TEST_CASE("fuzz regressions: numbers beyond double's range", "[fuzz][badinput][config]") {
  // fuzz_config (900 s run), minimised to " 6E333": json::parse throws out_of_range 406, not
  // parse_error, and the loaders caught only the latter.
  CHECK(error_of([] {
          parse_config(" 6E333", {}, "f.json");
        }).rfind("config: 'f.json' is not valid JSON: ", 0) == 0);
  // The same number in a --set value is a string there, so the type check names the key.
  CHECK(error_of([] { parse_config("{}", {"optim.lr=1e999"}, "f.json"); }) ==
        "f.json: config key 'optim.lr' must be number, got string (\"1e999\")");
  // fuzz_safetensors (900 s run): the same exception from the header's JSON.
  const std::string h = R"({"a": {"dtype": "F32", "shape": [1e999], "data_offsets": [0, 4]}})";
  CHECK(error_of([&] {
          SafetensorsFile f(
              bytes(std::string(1, char(h.size())) + std::string(7, '\0') + h + "abcd"), "f.st");
        }).rfind("f.st: bad safetensors header: ", 0) == 0);
}
