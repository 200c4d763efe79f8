// Every document a source file points at exists: `docs/<name>.md` in comments and messages, and
// "attention-variants.md §N" section references (docs/attention-variants.md has a heading N).
// A reference that does not resolve sends a reader nowhere.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "test_util.h"

using namespace tda;
namespace fs = std::filesystem;

namespace {

std::string read_all(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// "path:line: reference" for each reference in `text` (from `path`) that does not resolve under
// the source tree `root`.
std::vector<std::string> broken_refs(const std::string& root, const std::string& path,
                                     const std::string& text) {
  static const std::regex doc(R"(docs/([A-Za-z0-9_\-]+)\.md)");
  static const std::regex sec(R"(attention-variants\.md[ ,;]*§\s*(\d+(?:\.\d+)?))");
  const std::string spec = read_all(root + "/docs/attention-variants.md");
  std::vector<std::string> bad;
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    for (std::sregex_iterator it(line.begin(), line.end(), doc), end; it != end; ++it)
      if (!fs::exists(root + "/docs/" + (*it)[1].str() + ".md"))
        bad.push_back(path + ":" + std::to_string(n) + ": " + it->str());
    for (std::sregex_iterator it(line.begin(), line.end(), sec), end; it != end; ++it) {
      const std::string s = (*it)[1].str();
      const std::string heading = (s.find('.') == std::string::npos ? "\n## " : "\n### ") + s +
                                  (s.find('.') == std::string::npos ? ". " : " ");
      if (spec.find(heading) == std::string::npos)
        bad.push_back(path + ":" + std::to_string(n) + ": " + it->str());
    }
  }
  return bad;
}

}  // namespace

TEST_CASE("every docs/*.md and attention-variants.md § reference in the sources resolves",
          "[docs]") {
  const std::string root = source_dir();
  std::vector<std::string> bad;
  int files = 0, sections = 0;
  for (const std::string dir : {"src", "kernels", "tests", "scripts", "python", "configs"}) {
    for (const auto& e : fs::recursive_directory_iterator(root + "/" + dir)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() ||
          !std::set<std::string>{".cpp", ".h", ".cu", ".cuh", ".py", ".sh", ".json"}.count(ext))
        continue;
      const std::string text = read_all(e.path().string());
      ++files;
      for (size_t p = 0; (p = text.find("attention-variants.md", p)) != std::string::npos; ++p)
        ++sections;
      const auto b = broken_refs(root, e.path().string().substr(root.size() + 1), text);
      bad.insert(bad.end(), b.begin(), b.end());
    }
  }
  INFO([&] {
    std::string s;
    for (const auto& b : bad) s += b + "\n";
    return s;
  }());
  CHECK(bad.empty());
  CHECK(files > 100);
  CHECK(sections >= 15);  // the mechanisms' files cite their section
  // negative controls: a missing page and a section the spec does not have are caught (the
  // strings are split so that this file's own scan does not see them)
  CHECK(broken_refs(root, "x.cpp",
                    "// see docs/no_such_page"
                    ".md")
            .size() == 1);
  CHECK(broken_refs(root, "x.cpp",
                    "// attention-variants.md "
                    "§99")
            .size() == 1);
  CHECK(broken_refs(root, "x.cpp",
                    "// attention-variants.md "
                    "§0.9")
            .size() == 1);
  CHECK(broken_refs(root, "x.cpp", "// docs/sweeps.md, attention-variants.md §11, §0.1").empty());
  CHECK(broken_refs(root, "x.cpp", "// attention-variants.md §0.1").empty());
}
