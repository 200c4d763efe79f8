#include "eval/mc_data.h"

#include <cctype>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tda {

using json = nlohmann::json;

namespace {

const std::string kEvalDir = TDA_SOURCE_DIR "/../shared/data/evals/";

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

std::string dir_of(const std::string& p) {
  const auto k = p.find_last_of('/');
  return k == std::string::npos ? "." : p.substr(0, k);
}

// All lines of a file; ".bz2" files are decompressed through `bzip2 -dc` (no libbz2 needed).
std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> lines;
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

std::vector<json> read_jsonl(const std::string& path) {
  std::vector<json> r;
  int ln = 0;
  for (const auto& l : read_lines(path)) {
    ++ln;
    if (l.find_first_not_of(" \t") == std::string::npos) continue;
    try {
      r.push_back(json::parse(l));
    } catch (const json::exception& e) {
      throw Error("eval: " + path + ":" + std::to_string(ln) + ": " + e.what());
    }
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
  TDA_CHECK(key.size() == 1, "eval: unexpected answer key '" + key + "'");
  if (key[0] >= 'A' && key[0] <= 'Z') return key[0] - 'A';
  if (key[0] >= '1' && key[0] <= '9') return key[0] - '1';
  throw Error("eval: unexpected answer key '" + key + "'");
}

std::string arc_context(const std::string& question) {
  return "Question: " + question + "\nAnswer:";
}

void check_gold(const McItem& it, const std::string& where) {
  TDA_CHECK(it.excluded || (it.gold >= 0 && it.gold < int(it.choices.size())),
            "eval: " + where + ": gold label out of range");
}

// --- per task ------------------------------------------------------------------------------

McDataset load_hellaswag(const std::string& path) {
  McDataset d;
  if (ends_with(path, ".txt") || ends_with(path, ".txt.bz2")) {
    // 6 lines per task: "activity_label: ctx", label, 4 endings (README: lossy but already
    // close to lm-eval's preprocess; ctx_b's capitalisation cannot be recovered)
    d.format = "hellaswag_text";
    std::vector<std::string> lines = read_lines(path);
    while (!lines.empty() && lines.back().empty()) lines.pop_back();
    TDA_CHECK(lines.size() % 6 == 0, "eval: " + path + ": expected 6 lines per task");
    for (size_t i = 0; i < lines.size(); i += 6) {
      std::vector<std::string> ends;
      for (int k = 0; k < 4; ++k) ends.push_back(hellaswag_preprocess(lines[i + 2 + size_t(k)]));
      d.items.push_back(
          shared_context(hellaswag_preprocess(lines[i]), ends, std::stoi(lines[i + 1])));
    }
    return d;
  }
  d.format = "hellaswag_jsonl";
  for (const auto& j : read_jsonl(path)) {
    const std::string ctx = j.contains("ctx_a")
                                ? j.at("ctx_a").get<std::string>() + " " +
                                      py_capitalize(j.at("ctx_b").get<std::string>())
                                : j.at("ctx").get<std::string>();
    std::vector<std::string> ends;
    for (const auto& e : j.at("endings"))
      ends.push_back(hellaswag_preprocess(e.get<std::string>()));
    const json& lab = j.at("label");
    const int gold = lab.is_string() ? std::stoi(lab.get<std::string>()) : lab.get<int>();
    d.items.push_back(shared_context(
        hellaswag_preprocess(j.at("activity_label").get<std::string>() + ": " + ctx), ends, gold));
  }
  return d;
}

// ARC and OpenBookQA: MosaicML {"query","choices","gold"} or AI2 {"question":{"stem",
// "choices":[{"text","label"}]},"answerKey"}.
McDataset load_qa(const std::string& path, bool arc) {
  McDataset d;
  for (const auto& j : read_jsonl(path)) {
    if (j.contains("query")) {
      d.format = "mosaicml_icl";
      std::string q = j.at("query").get<std::string>();
      // MosaicML's ARC query already reads "Question: ..."; OBQA's is the bare question_stem
      std::string ctx = arc ? q + "\nAnswer:" : q;
      d.items.push_back(shared_context(ctx, j.at("choices").get<std::vector<std::string>>(),
                                       j.at("gold").get<int>()));
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
      d.items.push_back(shared_context(arc ? arc_context(stem) : stem, texts, gold));
    }
  }
  return d;
}

// MosaicML's ARC labels are wrong on rows listed in ../shared/data/README.md. The official key
// (same row order) decides: "1".."4" keys are 1-based (MosaicML took them as 0-based); 3-choice
// questions were padded to 4 by prepending a copy of another choice, which is dropped again;
// a row whose official answer is not among the 4 kept choices is excluded.
void apply_arc_fix(McDataset& d, const std::string& keys_path) {
  std::vector<json> keys = read_jsonl(keys_path);
  TDA_CHECK(keys.size() == d.items.size(), "eval: " + keys_path + " has " +
                                               std::to_string(keys.size()) + " keys for " +
                                               std::to_string(d.items.size()) + " rows");
  for (size_t i = 0; i < d.items.size(); ++i) {
    McItem& it = d.items[i];
    const int idx = letter_index(strip(keys[i].at("answerKey").get<std::string>()));
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

McDataset load_piqa(const std::string& path, std::string labels) {
  McDataset d;
  std::vector<json> rows = read_jsonl(path);
  std::vector<std::string> lab;
  if (!rows.empty() && rows[0].contains("goal") && !rows[0].contains("label")) {
    if (labels.empty()) labels = dir_of(path) + "/valid-labels.lst";
    for (const auto& l : read_lines(labels))
      if (!strip(l).empty()) lab.push_back(strip(l));
    TDA_CHECK(lab.size() == rows.size(), "eval: " + labels + " has " + std::to_string(lab.size()) +
                                             " labels for " + std::to_string(rows.size()) +
                                             " rows");
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const json& j = rows[i];
    if (j.contains("query")) {  // MosaicML: query = "Question: <goal>"
      d.format = "mosaicml_icl";
      d.items.push_back(shared_context(j.at("query").get<std::string>() + "\nAnswer:",
                                       j.at("choices").get<std::vector<std::string>>(),
                                       j.at("gold").get<int>()));
      continue;
    }
    d.format = "piqa_original";
    const int gold = j.contains("label") ? j.at("label").get<int>() : std::stoi(lab[i]);
    d.items.push_back(
        shared_context(arc_context(j.at("goal").get<std::string>()),
                       {j.at("sol1").get<std::string>(), j.at("sol2").get<std::string>()}, gold));
  }
  return d;
}

// Partial scoring: each option fills the blank in its own context; the shared rest of the
// sentence is the continuation scored.
McDataset load_winogrande(const std::string& path) {
  McDataset d;
  for (const auto& j : read_jsonl(path)) {
    McItem it;
    if (j.contains("context_options")) {
      d.format = "mosaicml_icl";
      const std::string cont = " " + strip(j.at("continuation").get<std::string>());
      for (const auto& c : j.at("context_options"))
        it.choices.push_back({c.get<std::string>(), cont});
      it.gold = j.at("gold").get<int>();
    } else {
      d.format = "winogrande_jsonl";
      const std::string s = j.at("sentence").get<std::string>();
      const size_t k = s.find('_');
      TDA_CHECK(k != std::string::npos, "eval: winogrande sentence without '_': " + s);
      const std::string cont = " " + strip(s.substr(k + 1));
      for (const char* o : {"option1", "option2"})
        it.choices.push_back({s.substr(0, k) + j.at(o).get<std::string>(), cont});
      it.gold = std::stoi(j.at("answer").get<std::string>()) - 1;
    }
    d.items.push_back(std::move(it));
  }
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

std::string mc_default_path(const std::string& task) {
  if (task == "hellaswag") return kEvalDir + "hellaswag/hellaswag_val_full.txt.bz2";
  if (task == "arc_easy") return kEvalDir + "mosaicml_icl/arc_easy.jsonl";
  if (task == "arc_challenge") return kEvalDir + "mosaicml_icl/arc_challenge.jsonl";
  if (task == "openbookqa") return kEvalDir + "mosaicml_icl/openbook_qa.jsonl";
  if (task == "piqa") return kEvalDir + "piqa/valid.jsonl";
  if (task == "winogrande") return kEvalDir + "mosaicml_icl/winogrande.jsonl";
  throw Error("eval: unknown task '" + task +
              "' (hellaswag, arc_easy, arc_challenge, openbookqa, piqa, winogrande)");
}

McDataset load_mc(const McLoadOptions& o) {
  const std::string path = o.data.empty() ? mc_default_path(o.task) : o.data;
  mc_default_path(o.task);  // validates the task name
  McDataset d;
  const bool arc = o.task == "arc_easy" || o.task == "arc_challenge";
  if (o.task == "hellaswag")
    d = load_hellaswag(path);
  else if (arc || o.task == "openbookqa")
    d = load_qa(path, arc);
  else if (o.task == "piqa")
    d = load_piqa(path, o.labels);
  else
    d = load_winogrande(path);
  d.task = o.task;
  d.path = path;
  if (arc && d.format == "mosaicml_icl" && o.arc_fix) {
    const std::string keys =
        !o.arc_keys.empty() ? o.arc_keys
                            : kEvalDir + "aristo_answer_keys/" + o.task + "_test_answers.jsonl";
    apply_arc_fix(d, keys);
  }
  for (size_t i = 0; i < d.items.size(); ++i)
    check_gold(d.items[i], path + " row " + std::to_string(i));
  return d;
}

}  // namespace tda
