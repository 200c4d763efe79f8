// tda eval mc --checkpoint DIR --task T [--data PATH] [--limit N] [--out FILE]
//             [--device cpu|cuda] [--dtype fp32|bf16]
// Zero-shot multiple-choice accuracy (docs/evaluation.md): hellaswag, arc_easy, arc_challenge,
// openbookqa, piqa, winogrande; JSON result on stdout (and in --out).
#include <cxxopts.hpp>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/device_flags.h"
#include "cli/eval_command.h"
#include "core/error.h"
#include "data/tokenizer.h"
#include "eval/loaded_model.h"
#include "eval/mc.h"

namespace tda {
namespace {

int cmd_eval_mc(int argc, char** argv) {
  cxxopts::Options opts(argv[0], "Zero-shot multiple-choice evaluation (lm-eval scoring)");
  opts.add_options()("checkpoint", "checkpoint directory", cxxopts::value<std::string>())(
      "task", "hellaswag|arc_easy|arc_challenge|openbookqa|piqa|winogrande",
      cxxopts::value<std::string>())("data", "data file (default: ../shared/data/evals/...)",
                                     cxxopts::value<std::string>()->default_value(""))(
      "labels", "PIQA labels file for the original format",
      cxxopts::value<std::string>()->default_value(""))(
      "arc-keys", "official ARC answer key jsonl",
      cxxopts::value<std::string>()->default_value(""))("no-arc-fix",
                                                        "keep MosaicML's ARC labels as they are")(
      "limit", "first N items (0 = all)", cxxopts::value<int>()->default_value("0"))(
      "batch-tokens", "tokens per forward pass", cxxopts::value<int>()->default_value("4096"))(
      "tokenizer", "GPT-2 tokenizer directory",
      cxxopts::value<std::string>()->default_value(Gpt2Tokenizer::default_dir()))(
      "out", "also write the JSON result here", cxxopts::value<std::string>()->default_value(""))(
      "quiet", "no progress bar")("h,help", "show help");
  add_device_flags(opts);
  auto r = opts.parse(argc, argv);
  if (r.count("help") || !r.count("checkpoint") || !r.count("task")) {
    std::cout << opts.help() << "\n";
    return r.count("help") ? 0 : 2;
  }
  McLoadOptions lo;
  lo.task = r["task"].as<std::string>();
  lo.data = r["data"].as<std::string>();
  lo.labels = r["labels"].as<std::string>();
  lo.arc_keys = r["arc-keys"].as<std::string>();
  lo.arc_fix = !r.count("no-arc-fix");
  const McDataset d = load_mc(lo);
  const std::string ckpt = r["checkpoint"].as<std::string>();
  const EvalDevice dev = device_flags(r);
  LoadedModel lm = load_model_for_eval(ckpt, dev);
  const Gpt2Tokenizer tok = Gpt2Tokenizer::load(r["tokenizer"].as<std::string>());
  McRunOptions ro;
  ro.limit = r["limit"].as<int>();
  ro.batch_tokens = r["batch-tokens"].as<int>();
  ro.progress = !r.count("quiet");
  const McResult res = run_mc(*lm.model, tok, d, ro);
  nlohmann::json j = {{"task", res.task},
                      {"n", res.n},
                      {"acc", res.acc},
                      {"acc_stderr", res.acc_stderr},
                      {"acc_norm", res.acc_norm},
                      {"acc_norm_stderr", res.acc_norm_stderr},
                      {"excluded", res.excluded},
                      {"truncated_requests", res.truncated},
                      {"data", d.path},
                      {"format", d.format},
                      {"arc_fixed_rows", d.fixed_rows.size()}};
  emit_eval_result(j, ckpt, lm, dev, r["out"].as<std::string>(), "eval mc");
  return 0;
}

}  // namespace

void emit_eval_result(nlohmann::json result, const std::string& checkpoint, const LoadedModel& lm,
                      const EvalDevice& dev, const std::string& out, const std::string& who) {
  result["checkpoint"] = checkpoint;
  result["step"] = lm.step;
  result["seq_len"] = lm.cfg.model.seq_len;
  result["attention"] = lm.cfg.attention.kind;
  result["device"] = dev.device;
  result["dtype"] = dev.dtype;
  const std::string s = result.dump(2);
  std::cout << s << std::endl;
  if (out.empty()) return;
  std::ofstream f(out);
  TDA_CHECK(f.good(), who + ": cannot write '" + out + "'");
  f << s << "\n";
}

namespace {

RegisterEvalCommand reg_mc("mc", "zero-shot multiple choice (lm-eval scoring)", cmd_eval_mc);

std::string eval_usage() {
  std::string u = "usage: tda eval <evaluation> [options]   (tda eval <evaluation> --help)\n\n";
  for (const auto& kv : eval_commands()) u += "  " + kv.first + "\t" + kv.second.help + "\n";
  return u;
}

int cmd_eval(int argc, char** argv) {
  if (argc < 2) {
    std::cout << eval_usage();
    return 2;
  }
  const std::string sub = argv[1];
  if (sub == "-h" || sub == "--help") {
    std::cout << eval_usage();
    return 0;
  }
  auto it = eval_commands().find(sub);
  if (it == eval_commands().end()) {
    std::string names;
    for (const auto& kv : eval_commands()) names += (names.empty() ? "" : ", ") + kv.first;
    throw Error("eval: unknown evaluation '" + sub + "' (" + names + ")");
  }
  std::string name = std::string(argv[0]) + " " + sub;
  std::vector<char*> args{name.data()};
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  return it->second.run(int(args.size()), args.data());
}

RegisterCommand reg("eval", "evaluation of a checkpoint (tda eval --help lists them)", cmd_eval);

}  // namespace

std::map<std::string, Command>& eval_commands() {
  static std::map<std::string, Command> c;
  return c;
}

}  // namespace tda
