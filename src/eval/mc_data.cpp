#include "eval/mc_data.h"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tda {

using json = nlohmann::json;

namespace {

// The offline eval files: $TDA_EVAL_DATA if set (a user's own copy), else the project's
// ../shared (absent from a user's clone: load_mc then says how to pass --data).
std::string eval_dir() {
  const char* e = std::getenv("TDA_EVAL_DATA");
  return e && *e ? std::string(e) + "/" : std::string(TDA_SOURCE_DIR "/../shared/data/evals/");
}

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

std::string dir_of(const std::string& p) {
  const auto k = p.find_last_of('/');
  return k == std::string::npos ? "." : p.substr(0, k);
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t b = 0;
  while (b < text.size()) {
    size_t e = text.find('\n', b);
    if (e == std::string::npos) e = text.size();
    std::string l = text.substr(b, e - b);
    if (!l.empty() && l.back() == '\r') l.pop_back();
    lines.push_back(std::move(l));
    b = e + 1;
  }
  return lines;
}

// All lines of a file; ".bz2" files are decompressed through `bzip2 -dc` (no libbz2 needed).
McSource read_source(const std::string& path) {
  std::string text;
  if (ends_with(path, ".bz2")) {
    std::ifstream probe(path);
    TDA_CHECK(probe.good(), "eval: cannot open '" + path + "'");
    FILE* p = ::popen(("bzip2 -dc '" + path + "'").c_str(), "r");
    TDA_CHECK(p, "eval: cannot run bzip2 for '" + path + "'");
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
    TDA_CHECK(::pclose(p) == 0, "eval: 'bzip2 -dc " + path +
                                    "' failed (install bzip2 or pass a decompressed --data)");
  } else {
    std::ifstream f(path, std::ios::binary);
    TDA_CHECK(f.good(), "eval: cannot open '" + path + "'");
    text.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  return McSource{path, split_lines(text)};
}

// "[json.exception.out_of_range.403] key 'gold' not found" -> "key 'gold' not found"
std::string json_message(const json::exception& e) {
  const std::string w = e.what();
  const size_t k = w.find("] ");
  return w.rfind("[json.exception.", 0) == 0 && k != std::string::npos ? w.substr(k + 2) : w;
}

// Runs fn for one record; any error it raises (a missing key, a wrong type, a bad number)
// becomes one line naming the file and line.
struct LocatedError : Error {  // already names its file:line
  using Error::Error;
};
template <class F>
void at_line(const std::string& path, int line, F&& fn) {
  const std::string where = "eval: " + path + ":" + std::to_string(line) + ": ";
  try {
    fn();
  } catch (const LocatedError&) {
    throw;
  } catch (const json::exception& e) {
    throw LocatedError(where + json_message(e));
  } catch (const Error& e) {
    throw LocatedError(where + e.what());
  }
}

struct Row {
  json j;
  int line;  // 1-based
};

std::vector<Row> parse_jsonl(const McSource& src) {
  std::vector<Row> r;
  int ln = 0;
  for (const auto& l : src.lines) {
    ++ln;
    if (l.find_first_not_of(" \t") == std::string::npos) continue;
    at_line(src.path, ln, [&] {
      json j = json::parse(l);
      TDA_CHECK(j.is_object(), "expected a JSON object, got " + std::string(j.type_name()));
      r.push_back({std::move(j), ln});
    });
  }
  return r;
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

std::string strip(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

// j[key] as an int: an integer in int's range, not a float (nlohmann would convert 1e300 with
// undefined behaviour) or a string.
int int_field(const json& j, const char* key) {
  const json& v = j.at(key);
  TDA_CHECK(v.is_number_integer() && v.get<int64_t>() >= INT32_MIN && v.get<int64_t>() <= INT32_MAX,
            "'" + std::string(key) + "' must be an integer, got " +
                v.dump(-1, ' ', false, json::error_handler_t::replace));
  return int(v.get<int64_t>());
}

// A decimal integer and nothing else (Python's int() on a label), else an error naming it.
int parse_int(const std::string& s, const std::string& what) {
  const std::string t = strip(s);
  char* end = nullptr;
  errno = 0;
  const long v = t.empty() ? 0 : std::strtol(t.c_str(), &end, 10);
  TDA_CHECK(!t.empty() && *end == '\0' && errno == 0 && v >= INT32_MIN && v <= INT32_MAX,
            what + " must be an integer, got '" + s + "'");
  return int(v);
}

// Python str.replace: non-overlapping, left to right, one pass.
std::string replace_all(const std::string& s, const std::string& from, const std::string& to) {
  std::string r;
  size_t b = 0, k;
  while ((k = s.find(from, b)) != std::string::npos) {
    r.append(s, b, k - b);
    r += to;
    b = k + from.size();
  }
  r.append(s, b, std::string::npos);
  return r;
}

// One context shared by all continuations, each prefixed by lm-eval's target delimiter " ".
McItem shared_context(const std::string& ctx, const std::vector<std::string>& conts, int gold) {
  McItem it;
  for (const auto& c : conts) it.choices.push_back({ctx, " " + c});
  it.gold = gold;
  return it;
}

int letter_index(const std::string& key) {
  // official keys are "A".."E" or "1".."5" (NYSEDREGENTS items)
  if (key.size() == 1 && key[0] >= 'A' && key[0] <= 'Z') return key[0] - 'A';
  if (key.size() == 1 && key[0] >= '1' && key[0] <= '9') return key[0] - '1';
  throw Error("unexpected answer key '" + key + "' (expected A-Z or 1-9)");
}

std::string arc_context(const std::string& question) {
  return "Question: " + question + "\nAnswer:";
}

// Whether the first record of a jsonl file has `key` (false if it is not JSON: the parser then
// reports that line).
bool first_record_has(const McSource& src, const char* key) {
  for (const auto& l : src.lines) {
    if (l.find_first_not_of(" \t") == std::string::npos) continue;
    const json j = json::parse(l, nullptr, /*allow_exceptions=*/false);
    return j.is_object() && j.contains(key);
  }
  return false;
}

std::string where(const std::string& path, int line) {
  return path + ":" + std::to_string(line);
}

// --- per task ------------------------------------------------------------------------------

McDataset parse_hellaswag(const McSource& src) {
  McDataset d;
  const std::string& path = src.path;
  if (ends_with(path, ".txt") || ends_with(path, ".txt.bz2")) {
    // 6 lines per task: "activity_label: ctx", label, 4 endings (README: lossy but already
    // close to lm-eval's preprocess; ctx_b's capitalisation cannot be recovered)
    d.format = "hellaswag_text";
    std::vector<std::string> lines = src.lines;
    while (!lines.empty() && lines.back().empty()) lines.pop_back();
    TDA_CHECK(lines.size() % 6 == 0, "eval: " + where(path, int(lines.size() / 6 * 6 + 1)) +
                                         ": an incomplete task (6 lines per task: context, "
                                         "label, 4 endings)");
    for (size_t i = 0; i < lines.size(); i += 6) {
      std::vector<std::string> ends;
      for (int k = 0; k < 4; ++k) ends.push_back(hellaswag_preprocess(lines[i + 2 + size_t(k)]));
      int gold = 0;
      at_line(path, int(i) + 2, [&] { gold = parse_int(lines[i + 1], "the label"); });
      d.items.push_back(shared_context(hellaswag_preprocess(lines[i]), ends, gold));
      d.items.back().line = int(i) + 1;
    }
    return d;
  }
  d.format = "hellaswag_jsonl";
  for (const auto& r : parse_jsonl(src))
    at_line(path, r.line, [&] {
      const json& j = r.j;
      const std::string ctx = j.contains("ctx_a")
                                  ? j.at("ctx_a").get<std::string>() + " " +
                                        py_capitalize(j.at("ctx_b").get<std::string>())
                                  : j.at("ctx").get<std::string>();
      std::vector<std::string> ends;
      for (const auto& e : j.at("endings"))
        ends.push_back(hellaswag_preprocess(e.get<std::string>()));
      const json& lab = j.at("label");
      const int gold =
          lab.is_string() ? parse_int(lab.get<std::string>(), "'label'") : int_field(j, "label");
      d.items.push_back(shared_context(
          hellaswag_preprocess(j.at("activity_label").get<std::string>() + ": " + ctx), ends,
          gold));
      d.items.back().line = r.line;
    });
  return d;
}

// ARC and OpenBookQA: MosaicML {"query","choices","gold"} or AI2 {"question":{"stem",
// "choices":[{"text","label"}]},"answerKey"}.
McDataset parse_qa(const McSource& src, bool arc) {
  McDataset d;
  for (const auto& r : parse_jsonl(src))
    at_line(src.path, r.line, [&] {
      const json& j = r.j;
      if (j.contains("query")) {
        d.format = "mosaicml_icl";
        std::string q = j.at("query").get<std::string>();
        // MosaicML's ARC query already reads "Question: ..."; OBQA's is the bare question_stem
        std::string ctx = arc ? q + "\nAnswer:" : q;
        d.items.push_back(shared_context(ctx, j.at("choices").get<std::vector<std::string>>(),
                                         int_field(j, "gold")));
      } else {
        d.format = "ai2_jsonl";
        const json& qn = j.at("question");
        const std::string stem = qn.at("stem").get<std::string>();
        std::vector<std::string> texts;
        int gold = -1;
        const std::string key = strip(j.at("answerKey").get<std::string>());
        for (const auto& c : qn.at("choices")) {
          if (c.at("label").get<std::string>() == key) gold = int(texts.size());
          texts.push_back(c.at("text").get<std::string>());
        }
        TDA_CHECK(gold >= 0, "answerKey '" + key + "' is not the label of a choice");
        d.items.push_back(shared_context(arc ? arc_context(stem) : stem, texts, gold));
      }
      d.items.back().line = r.line;
    });
  return d;
}

// MosaicML's ARC labels are wrong on rows listed in ../shared/data/README.md. The official key
// (same row order) decides: "1".."4" keys are 1-based (MosaicML took them as 0-based); 3-choice
// questions were padded to 4 by prepending a copy of another choice, which is dropped again;
// a row whose official answer is not among the 4 kept choices is excluded.
void apply_arc_fix(McDataset& d, const McSource& key_src) {
  const std::vector<Row> keys = parse_jsonl(key_src);
  TDA_CHECK(keys.size() == d.items.size(), "eval: " + key_src.path + " has " +
                                               std::to_string(keys.size()) + " keys for " +
                                               std::to_string(d.items.size()) + " rows");
  for (size_t i = 0; i < d.items.size(); ++i) {
    McItem& it = d.items[i];
    int idx = 0;
    at_line(key_src.path, keys[i].line,
            [&] { idx = letter_index(strip(keys[i].j.at("answerKey").get<std::string>())); });
    bool changed = false;
    for (size_t k = 1; k < it.choices.size(); ++k)
      if (it.choices[k].continuation == it.choices[0].continuation) {
        it.choices.erase(it.choices.begin());  // the prepended padding copy
        changed = true;
        break;
      }
    if (idx >= int(it.choices.size())) {
      it.excluded = true;
      changed = true;
    } else if (idx != it.gold) {
      it.gold = idx;
      changed = true;
    }
    if (changed) d.fixed_rows.push_back(int(i));
  }
}

McDataset parse_piqa(const McSource& src, const McSource* labels) {
  McDataset d;
  const std::vector<Row> rows = parse_jsonl(src);
  std::vector<std::pair<std::string, int>> lab;  // (label, line)
  if (!rows.empty() && rows[0].j.contains("goal") && !rows[0].j.contains("label")) {
    TDA_CHECK(labels, "eval: " + src.path +
                          ": PIQA's original format keeps its labels in a separate file "
                          "(--labels, default valid-labels.lst next to the data)");
    for (size_t k = 0; k < labels->lines.size(); ++k)
      if (!strip(labels->lines[k]).empty()) lab.emplace_back(strip(labels->lines[k]), int(k) + 1);
    TDA_CHECK(lab.size() == rows.size(), "eval: " + labels->path + " has " +
                                             std::to_string(lab.size()) + " labels for " +
                                             std::to_string(rows.size()) + " rows");
  }
  for (size_t i = 0; i < rows.size(); ++i)
    at_line(src.path, rows[i].line, [&] {
      const json& j = rows[i].j;
      if (j.contains("query")) {  // MosaicML: query = "Question: <goal>"
        d.format = "mosaicml_icl";
        d.items.push_back(shared_context(j.at("query").get<std::string>() + "\nAnswer:",
                                         j.at("choices").get<std::vector<std::string>>(),
                                         int_field(j, "gold")));
      } else {
        d.format = "piqa_original";
        int gold = 0;
        if (j.contains("label")) {
          gold = int_field(j, "label");
        } else {
          TDA_CHECK(i < lab.size(), "a row without a label (the first row has 'label')");
          at_line(labels->path, lab[i].second,
                  [&] { gold = parse_int(lab[i].first, "the label"); });
        }
        d.items.push_back(shared_context(
            arc_context(j.at("goal").get<std::string>()),
            {j.at("sol1").get<std::string>(), j.at("sol2").get<std::string>()}, gold));
      }
      d.items.back().line = rows[i].line;
    });
  return d;
}

// Partial scoring: each option fills the blank in its own context; the shared rest of the
// sentence is the continuation scored.
McDataset parse_winogrande(const McSource& src) {
  McDataset d;
  for (const auto& r : parse_jsonl(src))
    at_line(src.path, r.line, [&] {
      const json& j = r.j;
      McItem it;
      if (j.contains("context_options")) {
        d.format = "mosaicml_icl";
        const std::string cont = " " + strip(j.at("continuation").get<std::string>());
        for (const auto& c : j.at("context_options"))
          it.choices.push_back({c.get<std::string>(), cont});
        it.gold = int_field(j, "gold");
      } else {
        d.format = "winogrande_jsonl";
        const std::string s = j.at("sentence").get<std::string>();
        const size_t k = s.find('_');
        TDA_CHECK(k != std::string::npos, "winogrande sentence without '_': " + s);
        const std::string cont = " " + strip(s.substr(k + 1));
        for (const char* o : {"option1", "option2"})
          it.choices.push_back({s.substr(0, k) + j.at(o).get<std::string>(), cont});
        const std::string ans = j.at("answer").get<std::string>();
        TDA_CHECK(ans == "1" || ans == "2", "'answer' must be \"1\" or \"2\", got \"" + ans + "\"");
        it.gold = ans[0] - '1';
      }
      it.line = r.line;
      d.items.push_back(std::move(it));
    });
  return d;
}

}  // namespace

std::string hellaswag_preprocess(const std::string& s) {
  std::string t = replace_all(strip(s), " [title]", ". ");
  std::string r;  // re.sub("\\[.*?\\]", "", t): a '[' up to the nearest ']' on the same line
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '[') {
      const size_t close = t.find(']', i + 1);
      const size_t nl = t.find('\n', i + 1);
      if (close != std::string::npos && (nl == std::string::npos || close < nl)) {
        i = close;
        continue;
      }
    }
    r += t[i];
  }
  return replace_all(r, "  ", " ");
}

std::string py_capitalize(const std::string& s) {
  std::string r = s;
  for (size_t i = 0; i < r.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(r[i]);
    if (c < 128) r[i] = char(i == 0 ? std::toupper(c) : std::tolower(c));
  }
  return r;
}

const std::vector<std::string>& mc_tasks() {
  static const std::vector<std::string> t = {"hellaswag",  "arc_easy", "arc_challenge",
                                             "openbookqa", "piqa",     "winogrande"};
  return t;
}

std::string mc_data_hint(const std::string& task) {
  if (task == "hellaswag") return "rowanz/hellaswag's hellaswag_val.jsonl, or the 6-line text form";
  if (task == "arc_easy" || task == "arc_challenge")
    return "AI2's ARC-" + std::string(task == "arc_easy" ? "Easy" : "Challenge") +
           "-Test.jsonl, or MosaicML llm-foundry's " + task + ".jsonl";
  if (task == "openbookqa")
    return "AI2's OpenBookQA Main test.jsonl, or MosaicML's openbook_qa.jsonl";
  if (task == "piqa")
    return "PIQA's valid.jsonl with valid-labels.lst beside it, or MosaicML's piqa.jsonl";
  if (task == "winogrande") return "WinoGrande 1.1's dev.jsonl, or MosaicML's winogrande.jsonl";
  return "";
}

std::string mc_default_path(const std::string& task) {
  if (task == "hellaswag") return eval_dir() + "hellaswag/hellaswag_val_full.txt.bz2";
  if (task == "arc_easy") return eval_dir() + "mosaicml_icl/arc_easy.jsonl";
  if (task == "arc_challenge") return eval_dir() + "mosaicml_icl/arc_challenge.jsonl";
  if (task == "openbookqa") return eval_dir() + "mosaicml_icl/openbook_qa.jsonl";
  if (task == "piqa") return eval_dir() + "piqa/valid.jsonl";
  if (task == "winogrande") return eval_dir() + "mosaicml_icl/winogrande.jsonl";
  throw Error("eval: unknown task '" + task +
              "' (hellaswag, arc_easy, arc_challenge, openbookqa, piqa, winogrande)");
}

McSource mc_source(const std::string& path, const std::string& text) {
  return McSource{path, split_lines(text)};
}

McDataset parse_mc(const std::string& task, const McSource& data, const McSource* labels,
                   const McSource* arc_keys) {
  mc_default_path(task);  // validates the task name
  McDataset d;
  const bool arc = task == "arc_easy" || task == "arc_challenge";
  if (task == "hellaswag")
    d = parse_hellaswag(data);
  else if (arc || task == "openbookqa")
    d = parse_qa(data, arc);
  else if (task == "piqa")
    d = parse_piqa(data, labels);
  else
    d = parse_winogrande(data);
  d.task = task;
  d.path = data.path;
  // An empty file would score 0 items as accuracy 0.0: a wrong number, not a result.
  TDA_CHECK(!d.items.empty(), "eval: " + data.path + ": no items (empty file?)");
  if (arc && d.format == "mosaicml_icl" && arc_keys) apply_arc_fix(d, *arc_keys);
  for (const auto& it : d.items)
    TDA_CHECK(it.excluded || (it.gold >= 0 && it.gold < int(it.choices.size())),
              "eval: " + where(data.path, it.line) + ": gold label " + std::to_string(it.gold) +
                  " out of range for " + std::to_string(it.choices.size()) + " choices");
  return d;
}

McDataset load_mc(const McLoadOptions& o) {
  const std::string path = o.data.empty() ? mc_default_path(o.task) : o.data;
  mc_default_path(o.task);  // validates the task name
  if (o.data.empty() && !std::ifstream(path).good())
    throw Error("eval: no " + o.task + " data at " + path + ": pass --data FILE (" +
                mc_data_hint(o.task) + "; docs/evaluation.md, \"Data files\")");
  const McSource data = read_source(path);
  McSource labels, keys;
  const bool arc = o.task == "arc_easy" || o.task == "arc_challenge";
  const bool piqa_original =
      o.task == "piqa" && first_record_has(data, "goal") && !first_record_has(data, "label");
  if (piqa_original)
    labels = read_source(o.labels.empty() ? dir_of(path) + "/valid-labels.lst" : o.labels);
  const bool mosaic_arc = arc && o.arc_fix && first_record_has(data, "query");
  if (mosaic_arc) {
    const std::string k = !o.arc_keys.empty()
                              ? o.arc_keys
                              : eval_dir() + "aristo_answer_keys/" + o.task + "_test_answers.jsonl";
    TDA_CHECK(!o.arc_keys.empty() || std::ifstream(k).good(),
              "eval: no official ARC answer key at " + k +
                  ": pass --arc-keys FILE (allenai/aristo-leaderboard's question-answers.jsonl) "
                  "or --no-arc-fix");
    keys = read_source(k);
  }
  return parse_mc(o.task, data, piqa_original ? &labels : nullptr, mosaic_arc ? &keys : nullptr);
}

}  // namespace tda
