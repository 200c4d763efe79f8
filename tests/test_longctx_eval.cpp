// `tda eval longctx` (src/eval/longctx.h): SCROLLS jsonl loading and lm-eval's prompts, the
// evaluation loop against an independent full-recompute greedy decoder and the full-forward
// log-likelihood scorer of `eval mc`, and the CLI end to end on hand-made SCROLLS files.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/tokenizer.h"
#include "eval/loaded_model.h"
#include "eval/longctx.h"
#include "eval/mc.h"
#include "test_eval_util.h"

using namespace tda;
using json = nlohmann::json;

namespace {

std::string data(const std::string& name) {
  return source_dir() + "/tests/data/" + name;
}

const Gpt2Tokenizer& gpt2() {
  static const Gpt2Tokenizer t = Gpt2Tokenizer::load(Gpt2Tokenizer::default_dir());
  return t;
}

// Greedy decoding by recomputing the whole window for every token (no KV cache), the
// reference for run_longctx's generations.
std::string reference_greedy(GPT2& model, const std::vector<int32_t>& prompt, int max_new) {
  const int V = model.config().real_vocab_size;
  std::vector<float> logits(size_t(model.config().vocab_size));
  std::vector<int32_t> ctx = prompt, out;
  for (int k = 0; k < max_new; ++k) {
    model.forward_logits(ctx.data(), int(ctx.size()), logits.data());
    const int32_t t =
        int32_t(std::max_element(logits.begin(), logits.begin() + V) - logits.begin());
    if (t == gpt2().eot()) break;
    out.push_back(t);
    ctx.push_back(t);
    if (gpt2().decode(out).find('\n') != std::string::npos) break;
  }
  const std::string s = gpt2().decode(out);
  return s.substr(0, s.find('\n'));
}

}  // namespace

TEST_CASE("longctx data: rows with one id are one example, and lm-eval's SCROLLS prompts",
          "[longctx][eval]") {
  const ScrollsDataset q = load_scrolls(data("scrolls_qmsum_tiny.jsonl"), "qmsum");
  CHECK(q.rows == 3);
  REQUIRE(q.examples.size() == 2);
  CHECK(q.examples[0].id == "qm-1");
  CHECK(q.examples[0].outputs.size() == 2);
  CHECK(q.examples[1].outputs.size() == 1);
  const ScrollsPrompt p = scrolls_prompt("qmsum", q.examples[1]);
  CHECK(p.text.rfind("Grad A: The new recognizer", 0) == 0);  // the text first ...
  CHECK(p.text.size() > 40);
  const std::string tail =  // ... then the query, as lm-eval's QMSum
      "\n\nQuestion: Summarize the discussion about the speech recognizer.\nAnswer:";
  CHECK(p.text.substr(p.text.size() - tail.size()) == tail);
  CHECK(!p.yes_no);
  ScrollsExample doc;
  doc.input = "A report.";
  CHECK(scrolls_prompt("gov_report", doc).text ==
        "A report.\n\nQuestion: What is a summary of the preceding text?\nAnswer:");
  const ScrollsDataset a = load_scrolls(data("scrolls_qasper_tiny.jsonl"), "qasper");
  REQUIRE(a.examples.size() == 3);
  CHECK(scrolls_prompt("qasper", a.examples[0]).yes_no);   // "Yes" / "yes."
  CHECK(!scrolls_prompt("qasper", a.examples[1]).yes_no);  // "BERT and GPT-2"
  CHECK(scrolls_is_summary("summ_screen_fd"));
  CHECK(!scrolls_is_summary("qasper"));

  TempDir dir;
  write_text(dir.path + "/bad.jsonl",
             "{\"id\": \"x\", \"input\": \"q\\n\\nt\", \"output\": \"o\"}\n"
             "{\"id\": \"y\", \"output\": \"o\"}\n");
  CHECK_THROWS_WITH(load_scrolls(dir.path + "/bad.jsonl", "qmsum"),
                    Catch::Contains("bad.jsonl:2: missing string field 'input'"));
  write_text(dir.path + "/noq.jsonl",
             "{\"id\": \"x\", \"input\": \"no query here\", \"output\": \"o\"}\n");
  CHECK_THROWS_WITH(load_scrolls(dir.path + "/noq.jsonl", "qasper"),
                    Catch::Contains("noq.jsonl:1: qasper input must start with the query"));
  CHECK_THROWS_WITH(load_scrolls(dir.path + "/bad.jsonl", "narrative_qa"),
                    Catch::Contains("unknown --task 'narrative_qa'"));
}

TEST_CASE("longctx eval: generations equal full-recompute greedy and yes/no equals the mc scorer",
          "[longctx][eval]") {
  TempDir dir;
  write_tiny_checkpoint(dir.path + "/ckpt", "tda", 128, {}, 300, /*small_vocab=*/false);
  LoadedModel lm = load_model_for_eval(dir.path + "/ckpt");
  LongctxOptions o;
  o.max_new_tokens = 12;
  o.progress = false;
  for (const std::string task : {"qmsum", "qasper"}) {
    INFO(task);
    // QMSum with a 96-token context, so that prompts get truncated; Qasper with the default
    // (the checkpoint's seq_len, 128), the window eval mc's scorer uses.
    o.max_context = task == "qmsum" ? 96 : 0;
    const int ctx = task == "qmsum" ? 96 : 128;
    const ScrollsDataset d = load_scrolls(data("scrolls_" + task + "_tiny.jsonl"), task);
    const LongctxResult r = run_longctx(*lm.model, gpt2(), d, o);
    CHECK(r.max_context == ctx);
    REQUIRE(r.items.size() == d.examples.size());
    size_t truncated = 0;
    std::vector<ExampleScores> ex;
    for (size_t i = 0; i < r.items.size(); ++i) {
      const LongctxItem& it = r.items[i];
      const std::string prompt = scrolls_prompt(task, d.examples[i]).text;
      const std::vector<int32_t> toks = gpt2().encode(prompt);
      truncated += toks.size() > size_t(ctx - 12) && !it.yes_no;
      if (it.yes_no) {
        // The same log-likelihoods through eval mc's batched full forward (window seq_len + 1).
        const std::vector<double> ll = score_loglik(
            *lm.model, {encode_pair(gpt2(), prompt, " yes"), encode_pair(gpt2(), prompt, " no")},
            4096);
        CHECK(it.ll_yes == Approx(ll[0]).epsilon(1e-4));
        CHECK(it.ll_no == Approx(ll[1]).epsilon(1e-4));
        CHECK(it.prediction == (ll[0] > ll[1] ? " yes" : " no"));
      } else {
        // lm-eval's rule: the prompt keeps its last max_context - max_new_tokens tokens.
        const size_t keep = std::min(toks.size(), size_t(ctx - 12));
        const std::vector<int32_t> kept(toks.end() - long(keep), toks.end());
        CHECK(it.kept == keep);
        std::string want = reference_greedy(*lm.model, kept, 12);
        if (task == "qasper" && want.find_first_not_of(" \t\n\r\v\f") == std::string::npos)
          want = "Unanswerable";
        CHECK(it.prediction == want);
      }
      const ExampleScores s = score_example(it.prediction, d.examples[i].outputs);
      CHECK(it.scores.rouge1 == s.rouge1);
      CHECK(it.scores.f1 == s.f1);
      ex.push_back(s);
    }
    CHECK(r.truncated == truncated);
    if (task == "qmsum") CHECK(truncated > 0);  // the left-truncation path ran
    const ScrollsScores agg = aggregate_scrolls(ex);
    CHECK(r.scores.rouge1 == agg.rouge1);
    CHECK(r.scores.f1 == agg.f1);
  }
}

TEST_CASE("longctx CLI: JSON summary, per-example predictions, one-line errors",
          "[longctx][eval]") {
  TempDir dir;
  write_tiny_checkpoint(dir.path + "/ckpt", "softmax", 128, {}, 300, /*small_vocab=*/false);
  std::string out;
  REQUIRE(run_tda("eval longctx --checkpoint " + dir.path + "/ckpt --task qmsum --data " +
                      data("scrolls_qmsum_tiny.jsonl") + " --max-new-tokens 8 --quiet --out " +
                      dir.path + "/r.json",
                  &out) == 0);
  std::ifstream f(dir.path + "/r.json");
  const json j = json::parse(f);
  CHECK(j.at("task") == "qmsum");
  CHECK(j.at("metric") == "rouge1");
  CHECK(j.at("n") == 2);
  CHECK(j.at("rows") == 3);
  CHECK(j.at("max_context") == 128);
  CHECK(j.at("score") == j.at("rouge1"));
  const double r1 = j.at("rouge1").get<double>();
  CHECK(r1 >= 0.0);
  CHECK(r1 <= 100.0);
  REQUIRE(j.at("predictions").size() == 2);
  double sum = 0;
  const ScrollsDataset d = load_scrolls(data("scrolls_qmsum_tiny.jsonl"), "qmsum");
  for (size_t i = 0; i < 2; ++i) {
    const json& p = j.at("predictions")[i];
    CHECK(p.at("id") == d.examples[i].id);
    const double s =
        score_example(p.at("prediction").get<std::string>(), d.examples[i].outputs).rouge1;
    CHECK(p.at("rouge1").get<double>() == Approx(s));
    sum += s * 100;
  }
  CHECK(r1 == Approx(sum / 2));

  REQUIRE(run_tda("eval longctx --checkpoint " + dir.path + "/ckpt --task qasper --data " +
                      data("scrolls_qasper_tiny.jsonl") + " --max-new-tokens 4 --limit 2 --quiet",
                  &out) == 0);
  const json q = json::parse(out.substr(out.find('{')));
  CHECK(q.at("metric") == "f1");
  CHECK(q.at("n") == 2);  // --limit

  CHECK(run_tda("eval longctx --checkpoint " + dir.path + "/ckpt --task narrative_qa --data " +
                    data("scrolls_qmsum_tiny.jsonl"),
                &out) != 0);
  CHECK(out.find("error: eval longctx: unknown --task 'narrative_qa'") != std::string::npos);
  CHECK(run_tda("eval longctx --checkpoint " + dir.path + "/ckpt --task qmsum --data " +
                    data("scrolls_qmsum_tiny.jsonl") + " --max-new-tokens 128 --quiet",
                &out) != 0);
  CHECK(out.find("--max-new-tokens must be in [1, max-context)") != std::string::npos);
}
