// tda eval longctx --checkpoint DIR --task qmsum|summ_screen_fd|gov_report|qasper --data FILE.jsonl
//                  [--max-context N] [--max-new-tokens M] [--limit K] [--out result.json] [--quiet]
//                  [--device cpu|cuda] [--dtype fp32|bf16]
// SCROLLS ROUGE / F1 on a user-supplied SCROLLS-format jsonl (src/eval/longctx.h,
// docs/long_context.md): the summary on stdout, the summary plus every prediction in --out.
#include <chrono>
#include <cxxopts.hpp>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/device_flags.h"
#include "cli/eval_command.h"
#include "core/error.h"
#include "data/tokenizer.h"
#include "eval/loaded_model.h"
#include "eval/longctx.h"
#include "model/generator.h"

namespace tda {
namespace {

int cmd_eval_longctx(int argc, char** argv) {
  cxxopts::Options opts(argv[0], "SCROLLS long-context evaluation (ROUGE / F1, greedy decoding)");
  opts.add_options()("checkpoint", "checkpoint directory", cxxopts::value<std::string>())(
      "task", "qmsum|summ_screen_fd|gov_report|qasper", cxxopts::value<std::string>())(
      "data", "SCROLLS jsonl (id, pid, input, output)", cxxopts::value<std::string>())(
      "max-context", "context in tokens, prompt + answer (0 = the checkpoint's seq_len)",
      cxxopts::value<int>()->default_value("0"))("max-new-tokens", "answer tokens at most",
                                                 cxxopts::value<int>()->default_value("256"))(
      "limit", "first K examples (0 = all)", cxxopts::value<int>()->default_value("0"))(
      "tokenizer", "GPT-2 tokenizer directory",
      cxxopts::value<std::string>()->default_value(Gpt2Tokenizer::default_dir()))(
      "out", "write the JSON result with every prediction here",
      cxxopts::value<std::string>()->default_value(""))("quiet", "no progress bar")("h,help",
                                                                                    "show help");
  add_device_flags(opts);
  auto r = opts.parse(argc, argv);
  if (r.count("help") || !r.count("checkpoint") || !r.count("task") || !r.count("data")) {
    std::cout << opts.help() << "\n";
    return r.count("help") ? 0 : 2;
  }
  const std::string task = r["task"].as<std::string>();
  check_scrolls_task(task);
  const ScrollsDataset d = load_scrolls(r["data"].as<std::string>(), task);
  const std::string ckpt = r["checkpoint"].as<std::string>();
  const EvalDevice dev = device_flags(r);
  LoadedModel lm = load_model_for_eval(ckpt, dev);
  TDA_CHECK(lm.cfg.model.real_vocab_size >= 50257,
            "eval longctx: the model's vocabulary (" +
                std::to_string(lm.cfg.model.real_vocab_size) + ") is not GPT-2's");
  const Gpt2Tokenizer tok = Gpt2Tokenizer::load(r["tokenizer"].as<std::string>());
  LongctxOptions o;
  o.max_context = r["max-context"].as<int>();
  o.max_new_tokens = r["max-new-tokens"].as<int>();
  o.limit = r["limit"].as<int>();
  TDA_CHECK(o.max_context >= 0 && o.limit >= 0,
            "eval longctx: --max-context and --limit must be >= 0");
  o.progress = !r.count("quiet");
  const int ctx = o.max_context > 0 ? o.max_context : lm.cfg.model.seq_len;
  require_memory(lm.model->ops(), Generator::memory_need(*lm.model, ctx),
                 "eval longctx: --max-context " + std::to_string(ctx));
  const auto t0 = std::chrono::steady_clock::now();
  const LongctxResult res = run_longctx(*lm.model, tok, d, o);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const bool summary = scrolls_is_summary(task);
  nlohmann::json j = {{"eval", "longctx"},
                      {"task", task},
                      {"n", res.scores.n},
                      {"metric", summary ? "rouge1" : "f1"},
                      {"score", summary ? res.scores.rouge1 : res.scores.f1},
                      {"max_context", res.max_context},
                      {"max_new_tokens", res.max_new_tokens},
                      {"truncated_prompts", res.truncated},
                      {"data", d.path},
                      {"rows", d.rows},
                      {"checkpoint", ckpt},
                      {"step", lm.step},
                      {"seq_len", lm.cfg.model.seq_len},
                      {"rope_ntk_factor", lm.cfg.model.rope_ntk_factor},
                      {"attention", lm.cfg.attention.kind},
                      {"seconds", secs},
                      {"device", dev.device},
                      {"dtype", dev.dtype}};
  if (summary) {
    j["rouge1"] = res.scores.rouge1;
    j["rouge2"] = res.scores.rouge2;
    j["rougeL"] = res.scores.rougeL;
    j["scrolls_score"] = res.scores.rouge_geometric_mean;  // SCROLLS: geometric mean of the three
  } else {
    j["f1"] = res.scores.f1;
    j["scrolls_score"] = res.scores.f1;
  }
  std::cout << j.dump(2) << std::endl;
  const std::string out = r["out"].as<std::string>();
  if (!out.empty()) {
    nlohmann::json items = nlohmann::json::array();
    for (const auto& it : res.items) {
      nlohmann::json x = {{"id", it.id},
                          {"prediction", it.prediction},
                          {"prompt_tokens", it.prompt_tokens},
                          {"kept_tokens", it.kept}};
      if (summary) {
        x["rouge1"] = it.scores.rouge1;
        x["rouge2"] = it.scores.rouge2;
        x["rougeL"] = it.scores.rougeL;
      } else {
        x["f1"] = it.scores.f1;
      }
      if (it.yes_no) x["loglik_yes_no"] = {it.ll_yes, it.ll_no};
      items.push_back(x);
    }
    j["predictions"] = items;
    std::ofstream f(out);
    TDA_CHECK(f.good(), "eval longctx: cannot write '" + out + "'");
    // The model's text may be cut inside a UTF-8 character: replace, don't throw.
    f << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  return 0;
}

RegisterEvalCommand reg("longctx", "SCROLLS ROUGE / F1 (qmsum, summ_screen_fd, gov_report, qasper)",
                        cmd_eval_longctx);

}  // namespace
}  // namespace tda
