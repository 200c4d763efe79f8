// Tests that run once per registered attention kind (attention/registry.h), so that a kind added
// in its own file is trained, exported and checked by every suite without being listed anywhere.
//
// TDA_PER_KIND_TEST("tiny {kind} config trains", "[tags]", fn) registers one Catch2 test case per
// kind ({kind} in the name is replaced), each its own ctest entry. They are made in main(), after
// the static registrars of the kinds have run (static initialisation order across files is
// unspecified).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/config.h"

namespace tda {

// A kind's config at a scale ("tiny", "gpt2_162m"): configs/<scale>/<kind>.json where the kind
// has a file, else configs/<scale>/base.json with attention.kind set, which is what every such
// file holds (test_config.cpp checks that they agree).
Config load_kind_config(const std::string& scale, const std::string& kind,
                        const std::vector<std::string>& sets = {});
// The same as `tda` arguments: "--config FILE" or "--config BASE --set attention.kind=KIND".
std::string kind_config_args(const std::string& scale, const std::string& kind);

// The kinds the suites' "every kind" loops run: every registered kind (attention_kinds()), or the
// registered ones named in TDA_TEST_KINDS (comma separated), as scripts/check_demo_kind.sh runs
// those suites for its one new kind, the built-in ones being tested by the plain run. A name not
// registered is an error. test_kind(k): k is one of them.
std::vector<std::string> test_kinds();
bool test_kind(const std::string& kind);

using PerKindTest = std::function<void(const std::string& kind)>;
struct RegisterPerKindTest {
  RegisterPerKindTest(const char* name, const char* tags, PerKindTest fn);
};
// Called once by main(): turns every TDA_PER_KIND_TEST into one test case per registered kind.
void register_per_kind_tests();

#define TDA_PER_KIND_CAT2(a, b) a##b
#define TDA_PER_KIND_CAT(a, b) TDA_PER_KIND_CAT2(a, b)
#define TDA_PER_KIND_TEST(name, tags, fn) \
  static ::tda::RegisterPerKindTest TDA_PER_KIND_CAT(tda_per_kind_test_, __LINE__)(name, tags, fn)

}  // namespace tda
