// `tda eval mc`: the scorer against an independent log-likelihood computation (one sequence at
// a time, no batching/sorting/padding), acc vs acc_norm, WinoGrande partial scoring, left
// truncation; the loaders on the offline files (counts, ARC label fix, PIQA agreement) and on
// the original dataset formats; the CLI end to end.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "eval/mc.h"
#include "eval/mc_data.h"
#include "test_eval_util.h"

namespace tda {

namespace {

bool have_tokenizer() {
  return std::filesystem::exists(Gpt2Tokenizer::default_dir() + "/encoder.json");
}

bool have_shared_evals() {
  return std::filesystem::exists(std::string(TDA_SOURCE_DIR) + "/../shared/data/evals");
}

// log p(continuation | context) by the definition, one forward per sequence
double reference_loglik(GPT2& model, const Gpt2Tokenizer& tok, const std::string& ctx,
                        const std::string& cont) {
  std::string c = ctx;
  while (!c.empty() && (c.back() == ' ' || c.back() == '\n')) c.pop_back();
  const std::vector<int32_t> whole = tok.encode(ctx + cont);
  const size_t n_cont = whole.size() - tok.encode(c).size();
  const size_t L = size_t(model.config().seq_len);
  const size_t keep = std::min(whole.size(), L + 1);
  std::vector<int32_t> win(whole.end() - long(keep), whole.end());
  const int T = int(win.size()) - 1;
  model.set_batch(1, T);
  model.forward(win.data(), win.data() + 1, false, 0.f);
  double s = 0;
  for (int t = T - int(n_cont); t < T; ++t) s -= model.token_losses()[t];
  return s;
}

}  // namespace

TEST_CASE("eval mc: argmax and completion length follow lm-eval", "[eval]") {
  const std::vector<double> ll = {-10.0, -12.0, -30.0}, len = {2.0, 6.0, 60.0};
  CHECK(argmax_first(ll) == 0);
  CHECK(argmax_first(ll, &len) == 2);      // -5, -2, -0.5
  CHECK(argmax_first({-1.0, -1.0}) == 0);  // ties: the first, as np.argmax
  CHECK(completion_len(" abc") == 3);
  CHECK(completion_len(" caf\xC3\xA9") == 4);  // code points, not bytes
  CHECK(hellaswag_preprocess("  A [title] B [step] c  d ") == "A. B c d");
  CHECK(py_capitalize("hE said") == "He said");
}

TEST_CASE("eval mc: the scorer matches an independent log-likelihood computation", "[eval]") {
  if (!have_tokenizer()) {
    TDA_SKIP("no tokenizer at " << Gpt2Tokenizer::default_dir());
  }
  const Gpt2Tokenizer tok = Gpt2Tokenizer::load(Gpt2Tokenizer::default_dir());
  Config cfg = tiny_eval_config("softmax", 48, {"model.n_layer=1"}, false);
  CpuOps ops;
  GPT2 model(cfg.model, cfg.attention, ops);
  model.init_weights(3);
  perturb_for_test(model, 4);

  McDataset d;
  d.task = "handmade";
  std::string long_ctx;
  for (int i = 0; i < 40; ++i) long_ctx += "the quick brown fox jumps over the lazy dog ";
  const auto mc = mc_item;
  // 0: one short and one long choice: acc and acc_norm pick differently
  d.items.push_back(mc("Question: Which word?\nAnswer:", {" x", " x x x x x x x x x x"}, 1));
  // 1: trailing space in the context moves to the continuation (lm-eval _encode_pair)
  d.items.push_back(mc("The cat sat on the ", {"mat.", "roof of the house.", "dog"}, 0));
  // 2: context longer than seq_len: truncated from the left
  d.items.push_back(mc(long_ctx, {" again", " once more and then some"}, 0));
  // 3: WinoGrande partial scoring: the option is in the context, the rest is scored
  McItem w;
  w.choices = {
      {"Sarah was a much better surgeon than Maria so Sarah", " always got the easier cases."},
      {"Sarah was a much better surgeon than Maria so Maria", " always got the easier cases."}};
  w.gold = 1;
  d.items.push_back(w);
  McRunOptions ro;
  ro.progress = false;
  ro.batch_tokens = 100;  // several rows per batch, several batches
  const McResult r = run_mc(model, tok, d, ro);
  REQUIRE(r.n == d.items.size());
  CHECK(r.truncated == 2);
  int disagree = 0;
  for (size_t i = 0; i < d.items.size(); ++i) {
    std::vector<double> ref, len;
    for (const auto& c : d.items[i].choices) {
      ref.push_back(reference_loglik(model, tok, c.context, c.continuation));
      len.push_back(completion_len(c.continuation));
    }
    for (size_t c = 0; c < ref.size(); ++c) {
      INFO("item " << i << " choice " << c);
      CHECK(std::abs(r.logliks[i][c] - ref[c]) <= 1e-4 * std::max(1.0, std::abs(ref[c])));
    }
    CHECK(r.pred[i] == argmax_first(ref));
    CHECK(r.pred_norm[i] == argmax_first(ref, &len));
    disagree += r.pred[i] != r.pred_norm[i];
  }
  CHECK(r.pred[0] == 0);       // the 1-token choice has the higher total log-likelihood
  CHECK(r.pred_norm[0] == 1);  // the long one wins per character
  CHECK(disagree >= 1);
  CHECK(r.pred[3] == r.pred_norm[3]);  // one shared continuation: both metrics agree
  double acc = 0;
  for (size_t i = 0; i < r.n; ++i) acc += (r.pred[i] == r.gold[i]) / double(r.n);
  CHECK(r.acc == Approx(acc));
}

TEST_CASE("eval mc: loaders read the offline eval files with the expected counts", "[eval]") {
  if (!have_shared_evals()) {
    TDA_SKIP("../shared/data/evals not found");
  }
  const std::vector<std::pair<std::string, size_t>> expect = {
      {"arc_easy", 2376}, {"arc_challenge", 1172}, {"openbookqa", 500},
      {"piqa", 1838},     {"winogrande", 1267},    {"hellaswag", 10042}};
  for (const auto& e : expect) {
    McLoadOptions o;
    o.task = e.first;
    const McDataset d = load_mc(o);
    INFO(e.first);
    CHECK(d.items.size() == e.second);
  }
  McLoadOptions o;
  o.task = "hellaswag";
  const McDataset h = load_mc(o);
  CHECK(h.items[0].choices[0].context == "Roof shingle removal: A man is sitting on a roof. he");
  CHECK(h.items[0].choices[3].continuation == " starts pulling up roofing on a roof.");
  CHECK(h.items[0].gold == 3);
  int counts[4] = {0, 0, 0, 0};
  for (const auto& it : h.items) counts[it.gold]++;
  CHECK(counts[0] == 2515);
  CHECK(counts[1] == 2485);
  CHECK(counts[2] == 2584);
  CHECK(counts[3] == 2458);

  o.task = "winogrande";
  const McDataset wg = load_mc(o);
  CHECK(wg.items[0].choices[1].context == "Sarah was a much better surgeon than Maria so Maria");
  CHECK(wg.items[0].choices[0].continuation == " always got the easier cases.");
  CHECK(wg.items[0].gold == 1);

  o.task = "arc_easy";
  const McDataset ae = load_mc(o);
  CHECK(ae.items[0].choices[0].context ==
        "Question: Which statement best explains why photosynthesis is the foundation of most "
        "food webs?\nAnswer:");
  CHECK(ae.items[0].choices[0].continuation ==
        " Sunlight is the source of energy for nearly all ecosystems.");

  // PIQA: the original jsonl + labels agree with MosaicML's conversion on every gold label
  o.task = "piqa";
  const McDataset p1 = load_mc(o);
  o.data = std::string(TDA_SOURCE_DIR) + "/../shared/data/evals/mosaicml_icl/piqa.jsonl";
  const McDataset p2 = load_mc(o);
  REQUIRE(p1.items.size() == p2.items.size());
  int same = 0;
  for (size_t i = 0; i < p1.items.size(); ++i) same += p1.items[i].gold == p2.items[i].gold;
  CHECK(same == 1838);
  CHECK(p1.items[0].choices[0].context ==
        "Question: How do I ready a guinea pig cage for it's new occupants?\nAnswer:");
}

TEST_CASE("eval mc: the ARC fix changes exactly the rows the data README lists", "[eval]") {
  if (!have_shared_evals()) {
    TDA_SKIP("../shared/data/evals not found");
  }
  const std::vector<int> easy = {
      14,   26,   63,   91,   92,   93,   151,  174,  292,  328,  370,  378,  394,  429,
      452,  477,  487,  555,  560,  583,  639,  648,  649,  677,  681,  686,  707,  737,
      739,  742,  746,  749,  750,  755,  759,  846,  1140, 1156, 1194, 1303, 1313, 1376,
      1384, 1419, 1440, 1441, 1447, 1453, 1454, 1461, 1524, 1544, 1561, 1568, 1582, 1593,
      1597, 1664, 1665, 1677, 1691, 1693, 1788, 1871, 1889, 1897, 1938, 1952, 1966, 1979,
      1992, 2076, 2100, 2106, 2153, 2203, 2242, 2252, 2329};
  const std::vector<int> challenge = {44,  121, 135, 313, 385, 400, 427, 437,  444,  453,  546, 670,
                                      825, 845, 857, 886, 953, 963, 975, 1042, 1092, 1113, 1152};
  McLoadOptions o;
  o.task = "arc_easy";
  McDataset e = load_mc(o);
  CHECK(e.fixed_rows == easy);
  size_t excl = 0, three = 0;
  for (const auto& it : e.items) {
    excl += it.excluded;
    three += it.choices.size() == 3;
  }
  CHECK(excl == 1);  // TIMSS_1995_8_P4: the official answer E is not among the 4 kept
  CHECK(e.items[1441].excluded);
  CHECK(three == 7);  // padded 3-choice questions restored
  CHECK(e.items[93].choices.size() == 3);
  CHECK(e.items[93].choices[size_t(e.items[93].gold)].continuation == " increase");
  o.task = "arc_challenge";
  McDataset c = load_mc(o);
  CHECK(c.fixed_rows == challenge);
  o.arc_fix = false;
  CHECK(load_mc(o).fixed_rows.empty());
}

TEST_CASE("eval mc: loaders read the original dataset jsonl formats", "[eval]") {
  TempDir dir;
  const std::string p = dir.path + "/";
  write_text(
      p + "hs.jsonl",
      R"({"activity_label": "Making tea", "ctx_a": "A man boils water.", "ctx_b": "then HE", )"
      R"("endings": ["pours it [title] Enjoy.", "b", "c", "d"], "label": 2})"
      "\n");
  write_text(
      p + "arc.jsonl",
      R"({"id": "x", "question": {"stem": "What is hot?", "choices": [{"text": "ice", "label": "A"}, )"
      R"({"text": "fire", "label": "B"}]}, "answerKey": "B"})"
      "\n");
  write_text(
      p + "wg.jsonl",
      R"({"sentence": "The ball broke the table because the _ was heavy.", "option1": "ball", )"
      R"("option2": "table", "answer": "1"})"
      "\n");
  McLoadOptions o;
  o.task = "hellaswag";
  o.data = p + "hs.jsonl";
  McDataset h = load_mc(o);
  REQUIRE(h.items.size() == 1);
  CHECK(h.items[0].choices[0].context == "Making tea: A man boils water. Then he");
  CHECK(h.items[0].choices[0].continuation == " pours it. Enjoy.");
  CHECK(h.items[0].gold == 2);
  o.task = "arc_easy";
  o.data = p + "arc.jsonl";
  McDataset a = load_mc(o);
  CHECK(a.items[0].choices[1].context == "Question: What is hot?\nAnswer:");
  CHECK(a.items[0].choices[1].continuation == " fire");
  CHECK(a.items[0].gold == 1);
  CHECK(a.fixed_rows.empty());  // the fix applies to MosaicML files only
  o.task = "openbookqa";
  McDataset ob = load_mc(o);
  CHECK(ob.items[0].choices[0].context == "What is hot?");
  o.task = "winogrande";
  o.data = p + "wg.jsonl";
  McDataset w = load_mc(o);
  CHECK(w.items[0].choices[0].context == "The ball broke the table because the ball");
  CHECK(w.items[0].choices[1].context == "The ball broke the table because the table");
  CHECK(w.items[0].choices[0].continuation == " was heavy.");
  CHECK(w.items[0].gold == 0);
}

TEST_CASE("eval mc: the CLI scores a checkpoint and writes the JSON result", "[eval]") {
  if (!have_shared_evals() || !have_tokenizer()) {
    TDA_SKIP("needs ../shared/data/evals and the tokenizer");
  }
  TempDir dir;
  write_tiny_checkpoint(dir.path + "/ckpt", "tda", 64, {"model.n_layer=1"}, 10, false);
  std::string out;
  const int rc = run_tda("eval mc --checkpoint " + dir.path +
                             "/ckpt --task winogrande --limit 6 "
                             "--quiet --out " +
                             dir.path + "/r.json",
                         &out);
  INFO(out);
  REQUIRE(rc == 0);
  std::ifstream f(dir.path + "/r.json");
  json j = json::parse(f);
  CHECK(j.at("task") == "winogrande");
  CHECK(j.at("n") == 6);
  CHECK(j.at("acc").get<double>() >= 0.0);
  CHECK(j.at("acc").get<double>() <= 1.0);
  CHECK(run_tda("eval mc --checkpoint " + dir.path + "/ckpt --task nope --quiet") != 0);
}

}  // namespace tda
