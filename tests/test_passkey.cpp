// `tda eval passkey`: prompt construction byte-exact against the strings of the paper's appendix
// (copied here from paper.tex, "Details in Passkey Retrieval Tests"), length targeting, and the
// scoring loop with oracle answerers (one reads the needle from the prompt text, one is wrong).
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "eval/passkey.h"
#include "eval/passkey_answerer.h"
#include "model/generator.h"
#include "test_eval_util.h"
#include "test_util.h"

namespace tda {
namespace {

// The appendix's strings, verbatim.
const std::string kInstr =
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. "
    "I will quiz you about the important information there.";
const std::string kGarbage =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
const std::string kQuestion = "What is the pass key? The pass key is";

const Gpt2Tokenizer& tokenizer() {
  static const Gpt2Tokenizer t = Gpt2Tokenizer::load(Gpt2Tokenizer::default_dir());
  return t;
}
int count_tokens(const std::string& s) {
  return int(tokenizer().encode(s, false).size());
}

TEST_CASE("passkey prompt is byte-exact against the appendix", "[passkey]") {
  CHECK(passkey::kInstruction == kInstr);
  CHECK(passkey::kGarbageSentence == kGarbage);
  CHECK(passkey_question(0, 1) == kQuestion);
  CHECK(passkey_needle(4217, 0, 1) == "The pass key is 4217. Remember it. 4217 is the pass key.");
  // the garbage buffer: the base sentence repeated, one space between repetitions
  CHECK(passkey_garbage(0).empty());
  CHECK(passkey_garbage(30) == "The grass is green. The sky is");
  CHECK(passkey_garbage(89 + 1 + 9) == kGarbage + " The grass");
  CHECK(passkey_garbage(3 * 90) == kGarbage + " " + kGarbage + " " + kGarbage + " ");
  // instruction \n garbage_prefix \n needle \n garbage_suffix \n question; both garbage pieces
  // are cut from the start of the buffer
  const std::string expect = kInstr + "\n" + "The grass is green. The sky is" + "\n" +
                             "The pass key is 4217. Remember it. 4217 is the pass key." + "\n" +
                             "The grass is green. " + "\n" + kQuestion;
  CHECK(passkey_prompt({4217}, {30, 20}, 0) == expect);
  // k needles (ASSUMED format): k + 1 garbage pieces, needle j numbered j + 1, asked one at a time
  CHECK(passkey_prompt({11, 22}, {3, 0, 5}, 1) ==
        kInstr + "\nThe\nThe pass key number 1 is 11. Remember it. 11 is the pass key number 1.\n" +
            "\nThe pass key number 2 is 22. Remember it. 22 is the pass key number 2.\nThe g\n" +
            "What is the pass key number 2? The pass key number 2 is");
}

TEST_CASE("passkey answers: stripped exact match or first-integer match", "[passkey]") {
  CHECK(passkey_answer_correct("4217", 4217));
  CHECK(passkey_answer_correct(" 4217 \n", 4217));
  CHECK(passkey_answer_correct(" 4217. Remember", 4217));
  CHECK(passkey_answer_correct("the key: 04217!", 4217));
  CHECK_FALSE(passkey_answer_correct(" 42170.", 4217));
  CHECK_FALSE(passkey_answer_correct(" 421", 4217));
  CHECK_FALSE(passkey_answer_correct(" 4218", 4217));
  CHECK_FALSE(passkey_answer_correct(" the grass", 4217));
  CHECK_FALSE(passkey_answer_correct("", 4217));
}

TEST_CASE("passkey prompts hit the requested token length", "[passkey]") {
  // Rule: T - kLengthSlack <= tokens(prompt) <= T, GPT-2 tokens, no BOS; counted here again.
  PasskeyPromptBuilder b(count_tokens);
  for (int needles : {1, 4}) {
    Rng rng(77);
    for (int T : {300, 1000, 4000}) {
      const PasskeyTrial t = b.make_trial(T, needles, rng);
      REQUIRE(t.prompts.size() == size_t(needles));
      const int n = count_tokens(t.prompts[0]);
      CHECK(n == t.tokens);
      CHECK(n <= T);
      CHECK(n >= T - passkey::kLengthSlack);
      size_t sum = 0;
      for (size_t p : t.pieces) sum += p;
      CHECK(sum == t.n_garbage);
      for (int j = 0; j < needles; ++j) {
        CHECK(t.keys[size_t(j)] >= 1);
        CHECK(t.keys[size_t(j)] <= 50000);
        CHECK(t.prompts[size_t(j)] == passkey_prompt(t.keys, t.pieces, j));
      }
      if (needles == 4) {  // widely separated: needle j lies in the j-th quarter of the garbage
        size_t at = 0;
        for (int j = 0; j < 4; ++j) {
          at += t.pieces[size_t(j)];
          CHECK(at >= size_t(j) * t.n_garbage / 4);
          CHECK(at <= size_t(j + 1) * (t.n_garbage + 1) / 4);
        }
      }
    }
  }
  Rng rng(1);
  CHECK_THROWS_WITH(b.make_trial(20, 1, rng), Catch::Contains("shorter than the prompt"));
}

// Reads the asked needle's key from the prompt text (the question names the needle).
class OracleAnswerer final : public PasskeyAnswerer {
 public:
  explicit OracleAnswerer(int offset) : offset_(offset) {}
  std::vector<std::string> answer(const PasskeyTrial& t) override {
    std::vector<std::string> out;
    static const std::regex q("What is the pass key( number (\\d+))?\\?");
    for (const std::string& p : t.prompts) {
      std::smatch m;
      REQUIRE(std::regex_search(p, m, q));
      const std::string num = m[2].matched ? "number " + m[2].str() + " " : "";
      std::smatch k;
      REQUIRE(std::regex_search(
          p, k, std::regex("\nThe pass key " + num + "is (\\d+)\\. Remember it\\.")));
      out.push_back(" " + std::to_string(std::stoi(k[1].str()) + offset_) + ". Remember");
    }
    return out;
  }

 private:
  int offset_;
};

TEST_CASE("passkey scoring: an oracle reading the needle scores 100%, a wrong one 0%",
          "[passkey]") {
  PasskeyPromptBuilder b(count_tokens);
  for (int needles : {1, 2, 4}) {
    PasskeyOptions o;
    o.lengths = {250, 600};
    o.trials = 4;
    o.needles = needles;
    OracleAnswerer right(0), wrong(1);
    const auto r = run_passkey(o, b, right);
    REQUIRE(r.size() == 2);
    for (const auto& x : r) {
      CHECK(x.accuracy == 1.0);
      CHECK(x.total == 4 * needles);
      CHECK(x.tokens_max <= x.length);
    }
    for (const auto& x : run_passkey(o, b, wrong)) CHECK(x.accuracy == 0.0);
    // seeded: the same options give the same keys; another seed different ones
    CHECK(run_passkey(o, b, right)[1].trials[3].keys == r[1].trials[3].keys);
    o.seed = 99;
    CHECK(run_passkey(o, b, right)[1].trials[3].keys != r[1].trials[3].keys);
  }
}

TEST_CASE("passkey with a model: cache reuse across needles gives the fresh-cache answers",
          "[passkey]") {
  Config cfg = tiny_eval_config("tda", 128,
                                {"model.d_model=32", "model.n_head=2", "model.n_layer=2"}, false);
  CpuOps ops;
  GPT2 model(cfg.model, cfg.attention, ops);
  model.init_weights(11);
  perturb_for_test(model, 5);
  Generator shared(model, 256);
  GreedyPasskeyAnswerer a(shared, tokenizer(), 6);
  PasskeyPromptBuilder b(count_tokens);
  Rng rng(3);
  const PasskeyTrial t = b.make_trial(200, 2, rng);  // beyond seq_len 128: extended RoPE tables
  const std::vector<std::string> got = a.answer(t);
  REQUIRE(got.size() == 2);
  CHECK(a.prompt_tokens_reused() > 150);  // the second prompt reused the haystack
  for (size_t j = 0; j < 2; ++j) {
    Generator fresh(model, 256);
    GreedyPasskeyAnswerer one(fresh, tokenizer(), 6);
    PasskeyTrial single = t;
    single.prompts = {t.prompts[j]};
    CHECK(one.answer(single)[0] == got[j]);
  }
}

TEST_CASE("passkey CLI writes per-length JSON and rejects bad lengths", "[passkey]") {
  TempDir dir;
  write_tiny_checkpoint(dir.path + "/ckpt", "softmax", 64,
                        {"model.d_model=32", "model.n_head=2", "model.n_layer=2"}, 300, false);
  const std::string out = dir.path + "/pk.json";
  std::string log;
  const int rc =
      run_tda("eval passkey --checkpoint " + dir.path +
                  "/ckpt --lengths 150,250 --trials 2 --needles 2 --seed 5 --quiet --out " + out,
              &log);
  INFO(log);
  REQUIRE(rc == 0);
  nlohmann::json j;
  std::ifstream(out) >> j;
  CHECK(j["attention"] == "softmax");
  CHECK(j["needles"] == 2);
  REQUIRE(j["lengths"].size() == 2);
  CHECK(j["lengths"][1]["length"] == 250);
  CHECK(j["lengths"][1]["total"] == 4);
  CHECK(j["lengths"][1]["trials"].size() == 2);
  CHECK(j["lengths"][1]["prompt_tokens_max"].get<int>() <= 250);
  const double acc = j["lengths"][0]["accuracy"];
  CHECK((acc >= 0.0 && acc <= 1.0));
  CHECK(run_tda("eval passkey --checkpoint " + dir.path + "/ckpt --lengths 150,x --quiet", &log) !=
        0);
  CHECK(log.find("--lengths item 'x'") != std::string::npos);
  CHECK(run_tda("eval nope", &log) != 0);
  CHECK(log.find("passkey") != std::string::npos);  // the error lists the evaluations
}

}  // namespace
}  // namespace tda
