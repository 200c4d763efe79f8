#include "test_kinds.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "attention/registry.h"
#include "test_util.h"

namespace tda {

namespace {

std::string kind_file(const std::string& scale, const std::string& kind) {
  return source_dir() + "/configs/" + scale + "/" + kind + ".json";
}

struct Template {
  std::string name, tags;
  PerKindTest fn;
};
std::vector<Template>& templates() {
  static std::vector<Template> t;
  return t;
}

class KindInvoker final : public Catch::ITestInvoker {
 public:
  KindInvoker(PerKindTest fn, std::string kind) : fn_(std::move(fn)), kind_(std::move(kind)) {}
  void invoke() const override { fn_(kind_); }

 private:
  PerKindTest fn_;
  std::string kind_;
};

}  // namespace

Config load_kind_config(const std::string& scale, const std::string& kind,
                        const std::vector<std::string>& sets) {
  if (std::filesystem::exists(kind_file(scale, kind)))
    return load_config(kind_file(scale, kind), sets);
  std::vector<std::string> s{"attention.kind=" + kind};
  s.insert(s.end(), sets.begin(), sets.end());
  return load_config(source_dir() + "/configs/" + scale + "/base.json", s);
}

std::string kind_config_args(const std::string& scale, const std::string& kind) {
  if (std::filesystem::exists(kind_file(scale, kind))) return "--config " + kind_file(scale, kind);
  return "--config " + source_dir() + "/configs/" + scale +
         "/base.json --set attention.kind=" + kind;
}

std::vector<std::string> test_kinds() {
  const std::vector<std::string> all = attention_kinds();
  const char* env = std::getenv("TDA_TEST_KINDS");
  if (!env || !*env) return all;
  std::vector<std::string> picked;
  std::stringstream list(env);
  for (std::string k; std::getline(list, k, ',');) {
    if (std::find(all.begin(), all.end(), k) == all.end())
      throw std::runtime_error("TDA_TEST_KINDS: \"" + k + "\" is not a registered kind");
    picked.push_back(k);
  }
  return picked;
}

bool test_kind(const std::string& kind) {
  const std::vector<std::string> kinds = test_kinds();
  return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
}

RegisterPerKindTest::RegisterPerKindTest(const char* name, const char* tags, PerKindTest fn) {
  templates().push_back({name, tags, std::move(fn)});
}

void register_per_kind_tests() {
  for (const auto& t : templates())
    for (const auto& kind : attention_kinds()) {
      std::string name = t.name;
      const size_t at = name.find("{kind}");
      if (at != std::string::npos) name.replace(at, 6, kind);
      // Catch keeps the name and tags as std::string copies; the StringRefs only live here.
      Catch::getMutableRegistryHub().registerTest(
          Catch::makeTestCase(new KindInvoker(t.fn, kind), "", Catch::NameAndTags{name, t.tags},
                              Catch::SourceLineInfo(__FILE__, static_cast<std::size_t>(__LINE__))));
    }
}

}  // namespace tda
