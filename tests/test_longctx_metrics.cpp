// SCROLLS metrics (src/eval/longctx_metrics.h): the values SCROLLS publishes in its metric's
// docstring, then per-example agreement with the reference packages (rouge_score for ROUGE,
// transformers' squad_metrics for F1) on hand-made edge cases and on real text, through
// scripts/oracles/scrolls_metrics.py. The oracle part skips when rouge_score is missing.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/fs.h"
#include "eval/longctx_metrics.h"
#include "test_util.h"

using namespace tda;
using json = nlohmann::json;

TEST_CASE("longctx metrics: SCROLLS' own docstring example (gov_report and qasper configs)",
          "[longctx][metrics]") {
  // metrics/scrolls.py: predictions and references from its docstring, with the values it
  // prints: rouge1 72.2222, rouge2 33.3333, rougeL 72.2222, geometric mean 55.8136, f1 72.2222.
  const std::vector<std::string> preds = {"exact match example", "hello there", "general kenobi"};
  const std::vector<std::vector<std::string>> refs = {
      {"exact match example"}, {"hello", "hi there"}, {"commander kenobi"}};
  std::vector<ExampleScores> ex;
  for (size_t i = 0; i < preds.size(); ++i) ex.push_back(score_example(preds[i], refs[i]));
  const ScrollsScores s = aggregate_scrolls(ex);
  auto r4 = [](double x) { return std::round(x * 1e4) / 1e4; };  // SCROLLS rounds to 4 places
  CHECK(s.n == 3);
  CHECK(r4(s.rouge1) == 72.2222);
  CHECK(r4(s.rouge2) == 33.3333);
  CHECK(r4(s.rougeL) == 72.2222);
  CHECK(r4(s.rouge_geometric_mean) == 55.8136);
  CHECK(r4(s.f1) == 72.2222);
}

TEST_CASE("longctx metrics: definitions on hand-made cases", "[longctx][metrics]") {
  // No stemming (SCROLLS calls rouge_score with use_stemmer=False): "running" != "run".
  CHECK(rouge("they run", "they running").rouge1.fmeasure == Approx(0.5));
  // Case and punctuation separate tokens; non-ASCII letters separate too (rouge_score keeps
  // [a-z0-9] only), except U+212A KELVIN SIGN, which Python lower-cases to "k".
  CHECK(rouge_tokenize("Hello, WORLD!! x2-y") ==
        std::vector<std::string>{"hello", "world", "x2", "y"});
  CHECK(rouge_tokenize("caf\xC3\xA9 na\xC3\xAFve \xE2\x84\xAA"
                       "elvin") == std::vector<std::string>{"caf", "na", "ve", "kelvin"});
  // ROUGE-L: LCS of (a b c d) and (a c b d) is 3.
  CHECK(rouge("a b c d", "a c b d").rougeL.fmeasure == Approx(0.75));
  CHECK(rouge("", "anything").rouge1.fmeasure == 0.0);
  // SQuAD normalisation: lower, drop ASCII punctuation, drop whole-word articles, squash spaces.
  CHECK(squad_normalize("  The Cat, (a) dog;   an  apple!  ") == "cat dog apple");
  CHECK(squad_normalize("an-apple theatre") == "anapple theatre");  // punctuation goes first
  CHECK(squad_normalize("\xC3\x89T\xC3\x89 the \xC3\xA9t\xC3\xA9") ==
        "\xC3\xA9t\xC3\xA9 \xC3\xA9t\xC3\xA9");
  // "cat sat" vs "cat sat on mat": P = 2/2, R = 2/4, F1 = 2PR/(P+R) = 2/3.
  CHECK(squad_f1("The cat sat.", "a cat sat on the mat") == Approx(2.0 / 3.0));
  CHECK(squad_f1("yes", "no") == 0.0);
  CHECK(squad_f1("", "") == 0.0);  // SQuAD v1.1: no common token
}

namespace {

struct Item {
  std::string pred;
  std::vector<std::string> refs;
};

// Consecutive passages of a text as prediction / references (overlapping and not).
void add_passages(const std::string& text, size_t chunk, size_t count, std::vector<Item>* items) {
  for (size_t k = 0; k < count && (k + 3) * chunk < text.size(); ++k) {
    const size_t b = k * chunk * 2;
    if (b + 3 * chunk > text.size()) break;
    items->push_back({text.substr(b, chunk),
                      {text.substr(b + chunk / 2, chunk), text.substr(b + 2 * chunk, chunk)}});
  }
}

std::string utf8_safe_prefix(const std::string& s, size_t n) {
  n = std::min(n, s.size());
  while (n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

}  // namespace

TEST_CASE("longctx metrics: per-example ROUGE-1/2/L and F1 equal rouge_score and squad_metrics",
          "[longctx][metrics]") {
  const std::string py = source_dir() + "/.venv/bin/python";
  if (!path_exists(py)) {
    TDA_SKIP(py << " not found");
  }
  std::vector<Item> items = {
      {"The new recognizer reduced the error rate.", {"The recognizer reduced errors.", "No."}},
      {"Yes", {"yes."}},
      {"Unanswerable", {"BERT and GPT-2", "BERT, GPT-2"}},
      {"the the the a an", {"The"}},
      {"", {"something"}},
      {"   ", {"  "}},
      {"A b-c d_e (f) [g] {h} 'i' \"j\" `k`", {"b c d e f g h i j k"}},
      {"\xC4\xB0stanbul \xE2\x84\xAA\xC3\xA9 THE \xC3\x84rger an\xC3\xA9 the\xC3\xA9",
       {"istanbul the k"}},
      {"line one\nline two\tthree\xC2\xA0"
       "four\xE2\x80\x83"
       "five",
       {"one two three four five"}},
      {"12.50 euros, 30% -> 24%", {"12 50 euros 30 24"}},
      {"repeat repeat repeat word", {"repeat word word"}},
      {"caf\xC3\xA9 na\xC3\xAFve r\xC3\xA9sum\xC3\xA9",
       {"CAF\xC3\x89 NA\xC3\x8F"
        "VE R\xC3\x89SUM\xC3\x89"}},
  };
  // Real text: Tiny Shakespeare (in the repo) and, when present, English Wikipedia (non-ASCII).
  const std::vector<char> shakespeare =
      read_file_bytes(source_dir() + "/data/tinyshakespeare/input.txt");
  add_passages(std::string(shakespeare.begin(), shakespeare.begin() + 200000), 700, 20, &items);
  const std::string wiki = source_dir() + "/../shared/data/enwiki_sample/wiki_00";
  if (path_exists(wiki)) {
    const std::vector<char> w = read_file_bytes(wiki);
    std::string text(w.begin(), w.begin() + long(std::min<size_t>(w.size(), 300000)));
    std::vector<Item> wi;
    add_passages(text, 900, 20, &wi);
    for (auto& it : wi) {  // whole UTF-8 characters only, like real predictions
      it.pred = utf8_safe_prefix(it.pred, it.pred.size());
      for (auto& r : it.refs) r = utf8_safe_prefix(r, r.size());
      items.push_back(it);
    }
  } else {
    WARN("../shared/data/enwiki_sample absent: Wikipedia passages skipped");
  }
  TempDir dir;
  {
    std::ofstream f(dir.path + "/in.jsonl");
    for (const auto& it : items) {
      json j = {{"prediction", it.pred}, {"references", it.refs}};
      f << j.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    }
  }
  const int rc =
      std::system((py + " " + source_dir() + "/scripts/oracles/scrolls_metrics.py " + dir.path +
                   "/in.jsonl " + dir.path + "/out.jsonl 2>" + dir.path + "/err.txt")
                      .c_str());
  if (WIFEXITED(rc) && WEXITSTATUS(rc) == 3) {
    TDA_SKIP("rouge_score not installed (pip install rouge-score)");
  }
  REQUIRE(rc == 0);
  std::ifstream in(dir.path + "/out.jsonl");
  std::string line;
  size_t i = 0, f1_checked = 0;
  double worst = 0;
  while (std::getline(in, line)) {
    REQUIRE(i < items.size());
    INFO("item " << i << ": " << items[i].pred.substr(0, 80));
    const json o = json::parse(line);
    const ExampleScores e = score_example(items[i].pred, items[i].refs);
    CHECK(rouge_tokenize(items[i].pred) == o.at("tokens").get<std::vector<std::string>>());
    for (auto [mine, key] : {std::pair<double, const char*>{e.rouge1, "rouge1"},
                             {e.rouge2, "rouge2"},
                             {e.rougeL, "rougeL"}}) {
      CHECK(std::abs(mine - o.at(key).get<double>()) <= 1e-12);
      worst = std::max(worst, std::abs(mine - o.at(key).get<double>()));
    }
    if (!o.at("f1").is_null()) {
      CHECK(squad_normalize(items[i].pred) == o.at("norm").get<std::string>());
      CHECK(std::abs(e.f1 - o.at("f1").get<double>()) <= 1e-12);
      ++f1_checked;
    }
    ++i;
  }
  CHECK(i == items.size());
  WARN(i << " items vs rouge_score (" << f1_checked << " also vs squad_metrics), worst ROUGE diff "
         << worst);
  if (f1_checked == 0) WARN("F1 not checked: transformers not installed");
}
