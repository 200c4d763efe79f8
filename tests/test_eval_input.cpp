// Bad evaluation data gets one line naming file:line and a non-zero exit, never a score: an
// empty file, a missing key, a bad label, a gold index out of range, a line that is not JSON,
// in every multiple-choice reader (src/eval/mc_data.h) and the SCROLLS reader.
#include <catch2/catch.hpp>
#include <cstdlib>

#include "core/error.h"
#include "eval/mc_data.h"
#include "eval/scrolls_data.h"
#include "test_eval_util.h"

using namespace tda;

namespace {

McSource src(const std::string& path, std::vector<std::string> lines) {
  return McSource{path, std::move(lines)};
}

// The message of the tda::Error that parse_mc throws (empty if it does not throw).
std::string mc_error(const std::string& task, const McSource& data,
                     const McSource* labels = nullptr, const McSource* keys = nullptr) {
  try {
    parse_mc(task, data, labels, keys);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("eval input: every multiple-choice reader names file:line", "[eval][badinput]") {
  const std::string wg_ok = R"({"context_options": ["A", "B"], "continuation": "x", "gold": 0})";
  struct Case {
    std::string task, why;
    McSource data;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"winogrande", "missing key",
       src("wg.jsonl", {wg_ok, R"({"context_options": ["A", "B"], "continuation": "x"})"}),
       "eval: wg.jsonl:2: key 'gold' not found"},
      {"winogrande", "bad answer",
       src("wg.jsonl", {R"({"sentence": "a _ b", "option1": "x", "option2": "y", "answer": "x"})"}),
       "eval: wg.jsonl:1: 'answer' must be \"1\" or \"2\", got \"x\""},
      {"winogrande", "gold out of range",
       src("wg.jsonl",
           {"", wg_ok, "", R"({"context_options": ["A", "B"], "continuation": "x", "gold": 2})"}),
       "eval: wg.jsonl:4: gold label 2 out of range for 2 choices"},
      {"winogrande", "not JSON", src("wg.jsonl", {wg_ok, "{\"context_options\": [", wg_ok}),
       "eval: wg.jsonl:2: "},
      {"winogrande", "not an object", src("wg.jsonl", {"[1, 2]"}),
       "eval: wg.jsonl:1: expected a JSON object, got array"},
      {"winogrande", "wrong type",
       src("wg.jsonl", {R"({"context_options": ["A", "B"], "continuation": "x", "gold": "0"})"}),
       "eval: wg.jsonl:1: 'gold' must be an integer, got \"0\""},
      {"winogrande", "float gold",
       src("wg.jsonl", {R"({"context_options": ["A", "B"], "continuation": "x", "gold": 1e300})"}),
       "eval: wg.jsonl:1: 'gold' must be an integer, got 1e+300"},
      {"hellaswag", "text label",
       src("hs.txt", {"ctx", "0", "a", "b", "c", "d", "ctx", "two", "a", "b", "c", "d"}),
       "eval: hs.txt:8: the label must be an integer, got 'two'"},
      {"hellaswag", "text incomplete", src("hs.txt", {"ctx", "0", "a", "b", "c", "d", "ctx", "1"}),
       "eval: hs.txt:7: an incomplete task"},
      {"hellaswag", "jsonl label",
       src("hs.jsonl",
           {R"({"activity_label": "a", "ctx": "c", "endings": ["x", "y"], "label": "1x"})"}),
       "eval: hs.jsonl:1: 'label' must be an integer, got '1x'"},
      {"arc_easy", "AI2 answerKey",
       src("arc.jsonl",
           {R"({"question": {"stem": "q", "choices": [{"text": "a", "label": "A"}]}, "answerKey": "C"})"}),
       "eval: arc.jsonl:1: answerKey 'C' is not the label of a choice"},
      {"openbookqa", "choices type",
       src("obqa.jsonl", {R"({"query": "q", "choices": "abc", "gold": 0})"}),
       "eval: obqa.jsonl:1: type must be array, but is string"},
      {"piqa", "mosaic missing", src("piqa.jsonl", {R"({"query": "q", "gold": 0})"}),
       "eval: piqa.jsonl:1: key 'choices' not found"},
  };
  for (const auto& c : cases) {
    INFO(c.task << ": " << c.why);
    const std::string msg = mc_error(c.task, c.data);
    CHECK(msg.rfind(c.want, 0) == 0);
    CHECK(msg.find('\n') == std::string::npos);
    INFO(msg);
  }
  // An empty file (or one of blank lines) would score 0 items as accuracy 0.0.
  for (const auto& task : mc_tasks()) {
    INFO(task);
    CHECK(mc_error(task, src("e.jsonl", {})) == "eval: e.jsonl: no items (empty file?)");
    CHECK(mc_error(task, src("e.jsonl", {"", "  "})) == "eval: e.jsonl: no items (empty file?)");
  }
  // PIQA's original format: its labels come from the labels file, named with its own line.
  const McSource piqa = src("valid.jsonl", {R"({"goal": "g", "sol1": "a", "sol2": "b"})",
                                            R"({"goal": "g", "sol1": "a", "sol2": "b"})"});
  const McSource labels = src("valid-labels.lst", {"0", "one"});
  CHECK(mc_error("piqa", piqa, &labels) ==
        "eval: valid-labels.lst:2: the label must be an integer, got 'one'");
  const McSource short_labels = src("valid-labels.lst", {"0"});
  CHECK(mc_error("piqa", piqa, &short_labels) == "eval: valid-labels.lst has 1 labels for 2 rows");
  // The official ARC key file.
  const McSource arc =
      src("arc.jsonl", {R"({"query": "Question: q", "choices": ["a", "b"], "gold": 0})"});
  const McSource keys = src("keys.jsonl", {R"({"id": "x", "answerKey": "?"})"});
  CHECK(mc_error("arc_easy", arc, nullptr, &keys) ==
        "eval: keys.jsonl:1: unexpected answer key '?' (expected A-Z or 1-9)");
  // A good file still loads, with the line of each item.
  const McDataset d = parse_mc("winogrande", src("wg.jsonl", {"", wg_ok, wg_ok}));
  REQUIRE(d.items.size() == 2);
  CHECK(d.items[1].line == 3);
}

TEST_CASE("eval input: the CLI refuses an empty --data and names the missing default file",
          "[eval][badinput]") {
  TempDir dir;
  write_tiny_checkpoint(dir.path + "/ckpt", "softmax", 32, {}, 10, /*small_vocab=*/false);
  write_text(dir.path + "/empty.jsonl", "");
  std::string out;
  int rc = run_tda("eval mc --checkpoint " + dir.path + "/ckpt --task winogrande --quiet --data " +
                       dir.path + "/empty.jsonl",
                   &out);
  INFO(out);
  CHECK(rc != 0);
  CHECK(out == "error: eval: " + dir.path + "/empty.jsonl: no items (empty file?)\n");
  // No ../shared on a user's clone (TDA_EVAL_DATA points the defaults at an empty folder).
  const std::string env = "TDA_EVAL_DATA=" + dir.path + " ";
  const std::string cmd =
      env + TDA_BINARY + " eval mc --checkpoint " + dir.path + "/ckpt --task piqa --quiet 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  out.clear();
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int st = ::pclose(p);
  INFO(out);
  CHECK(WEXITSTATUS(st) == 1);
  CHECK(out.rfind(
            "error: eval: no piqa data at " + dir.path + "/piqa/valid.jsonl: pass --data FILE (",
            0) == 0);
  CHECK(out.find("valid-labels.lst") != std::string::npos);
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);
}

TEST_CASE("eval input: the SCROLLS reader names file:line", "[eval][badinput][longctx]") {
  auto err = [](const std::string& text) {
    try {
      parse_scrolls(text, "q.jsonl", "qmsum");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string ok = R"({"id": "a", "input": "q\n\ntext", "output": "o"})";
  CHECK(err("") == "eval longctx: q.jsonl: no examples");
  CHECK(err(ok + "\n" + R"({"id": "b", "output": "o"})") ==
        "eval longctx: q.jsonl:2: missing string field 'input'");
  CHECK(err(ok + "\n\n[1]\n") == "eval longctx: q.jsonl:3: expected a JSON object");
  CHECK(err(R"({"id": "a", "input": "no blank line", "output": "o"})") ==
        "eval longctx: q.jsonl:1: qmsum input must start with the query followed by a blank line "
        "(SCROLLS format)");
}
