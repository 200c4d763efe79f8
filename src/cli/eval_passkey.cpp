// tda eval passkey --checkpoint DIR [--lengths 500,1000,...,4000] [--trials 100] [--needles 1|2|4]
//                  [--seed S] [--max-context N] [--out FILE] [--quiet]
//                  [--device cpu|cuda] [--dtype fp32|bf16]
// Passkey retrieval (src/eval/passkey.h, docs/evaluation.md): per-length accuracy as JSON on
// stdout (and in --out); scripts/plot_passkey.py plots several result files.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cxxopts.hpp>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/device_flags.h"
#include "cli/eval_command.h"
#include "core/error.h"
#include "data/tokenizer.h"
#include "eval/loaded_model.h"
#include "eval/passkey.h"
#include "eval/passkey_answerer.h"
#include "model/generator.h"

namespace tda {
namespace {

int cmd_eval_passkey(int argc, char** argv) {
  cxxopts::Options opts(argv[0],
                        "Passkey retrieval (the paper's appendix prompt, greedy decoding)");
  opts.add_options()("checkpoint", "checkpoint directory", cxxopts::value<std::string>())(
      "lengths", "comma-separated prompt lengths in tokens",
      cxxopts::value<std::string>()->default_value("500,1000,1500,2000,2500,3000,3500,4000"))(
      "trials", "trials per length", cxxopts::value<int>()->default_value("100"))(
      "needles", "needles per prompt (1, 2 or 4)", cxxopts::value<int>()->default_value("1"))(
      "seed", "RNG seed of keys and positions", cxxopts::value<uint64_t>()->default_value("1234"))(
      "max-context", "KV-cache length (0 = longest length + 16); RoPE tables are built up to it",
      cxxopts::value<int>()->default_value("0"))("max-new-tokens", "answer tokens at most",
                                                 cxxopts::value<int>()->default_value("8"))(
      "tokenizer", "GPT-2 tokenizer directory",
      cxxopts::value<std::string>()->default_value(Gpt2Tokenizer::default_dir()))(
      "out", "also write the JSON result here", cxxopts::value<std::string>()->default_value(""))(
      "quiet", "no progress bar")("h,help", "show help");
  add_device_flags(opts);
  auto r = opts.parse(argc, argv);
  if (r.count("help") || !r.count("checkpoint")) {
    std::cout << opts.help() << "\n";
    return r.count("help") ? 0 : 2;
  }
  PasskeyOptions o;
  o.lengths = parse_positive_ints(r["lengths"].as<std::string>(), "eval passkey: --lengths");
  o.trials = r["trials"].as<int>();
  o.needles = r["needles"].as<int>();
  o.seed = r["seed"].as<uint64_t>();
  TDA_CHECK(o.trials >= 1, "eval passkey: --trials must be >= 1");
  TDA_CHECK(o.needles >= 1 && o.needles <= 16, "eval passkey: --needles must be in 1..16");
  const int max_new = r["max-new-tokens"].as<int>();
  TDA_CHECK(max_new >= 1, "eval passkey: --max-new-tokens must be >= 1");
  const int longest = *std::max_element(o.lengths.begin(), o.lengths.end());
  TDA_CHECK(long(longest) + std::max(16, max_new) <= INT_MAX,
            "eval passkey: --lengths " + std::to_string(longest) + " is too long");
  int max_ctx = r["max-context"].as<int>();
  const bool ctx_given = max_ctx > 0;
  if (!ctx_given) max_ctx = longest + 16;
  TDA_CHECK(max_ctx >= longest + max_new,
            "eval passkey: --max-context must cover the longest length + --max-new-tokens");

  const std::string ckpt = r["checkpoint"].as<std::string>();
  const EvalDevice dev = device_flags(r);
  LoadedModel lm = load_model_for_eval(ckpt, dev);
  TDA_CHECK(lm.cfg.model.real_vocab_size >= 50257,
            "eval passkey: the model's vocabulary (" +
                std::to_string(lm.cfg.model.real_vocab_size) + ") is not GPT-2's");
  require_memory(
      lm.model->ops(), Generator::memory_need(*lm.model, max_ctx),
      "eval passkey: " + (ctx_given ? "--max-context " + std::to_string(max_ctx)
                                    : "--lengths " + std::to_string(longest) + " (a context of " +
                                          std::to_string(max_ctx) + " tokens)"));
  const Gpt2Tokenizer tok = Gpt2Tokenizer::load(r["tokenizer"].as<std::string>());
  Generator gen(*lm.model, max_ctx);
  GreedyPasskeyAnswerer answerer(gen, tok, max_new);
  PasskeyPromptBuilder builder(
      [&](const std::string& s) { return int(tok.encode(s, false).size()); });
  const bool tty = ::isatty(2);
  if (!r.count("quiet"))
    o.progress = [&](int len, int done, int total) {
      if (tty || done == total)
        std::fprintf(stderr, "%spasskey length %d: %d/%d trials", tty ? "\r" : "", len, done,
                     total);
      if (done == total) std::fprintf(stderr, "\n");
    };
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<PasskeyLengthResult> res = run_passkey(o, builder, answerer);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  nlohmann::json lens = nlohmann::json::array();
  for (const auto& x : res) {
    nlohmann::json trials = nlohmann::json::array();
    for (size_t i = 0; i < x.trials.size(); ++i)
      trials.push_back({{"keys", x.trials[i].keys},
                        {"garbage_pieces", x.trials[i].pieces},
                        {"tokens", x.trials[i].tokens},
                        {"answers", x.answers[i]}});
    lens.push_back({{"length", x.length},
                    {"correct", x.correct},
                    {"total", x.total},
                    {"accuracy", x.accuracy},
                    {"prompt_tokens_min", x.tokens_min},
                    {"prompt_tokens_mean", x.tokens_mean},
                    {"prompt_tokens_max", x.tokens_max},
                    {"seconds", x.seconds},
                    {"trials", trials}});
  }
  nlohmann::json j = {{"eval", "passkey"},
                      {"checkpoint", ckpt},
                      {"attention", lm.cfg.attention.kind},
                      {"step", lm.step},
                      {"seq_len", lm.cfg.model.seq_len},
                      {"rope_ntk_factor", lm.cfg.model.rope_ntk_factor},
                      {"max_context", max_ctx},
                      {"needles", o.needles},
                      {"trials", o.trials},
                      {"seed", o.seed},
                      {"seconds", secs},
                      {"device", dev.device},
                      {"dtype", dev.dtype},
                      {"lengths", lens}};
  const std::string out = r["out"].as<std::string>();
  if (!out.empty()) {
    std::ofstream f(out);
    TDA_CHECK(f.good(), "eval passkey: cannot write '" + out + "'");
    f << j.dump(2) << "\n";
  }
  // stdout: the summary without the per-trial detail
  for (auto& l : j["lengths"]) l.erase("trials");
  std::cout << j.dump(2) << std::endl;
  return 0;
}

RegisterEvalCommand reg("passkey", "passkey retrieval accuracy per prompt length",
                        cmd_eval_passkey);

}  // namespace
}  // namespace tda
