// tda diag --checkpoint DIR (--text "..." | --tokens-file SHARD) [--T N] [--out FILE.json]
//          [--dump-map LAYER,HEAD]
// Attention diagnostics of attention-variants.md §13 on one sequence (B = 1, eval mode): per
// layer and head, per view and for the effective map: sparsity, max |A|, gSinkRatio(1),
// effective entropy, dispersion ratio, survivors per row, dead rows. docs/diagnostics.md.
#include <cxxopts.hpp>
#include <fstream>
#include <iostream>

#include "backend/cpu/cpu_ops.h"
#include "cli/command.h"
#include "core/error.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "eval/diagnostics.h"
#include "train/checkpoint.h"

namespace tda {
namespace {

int cmd_diag(int argc, char** argv) {
  cxxopts::Options opts(argv[0], "Attention diagnostics (sparsity, max|A|, gSinkRatio, entropy)");
  opts.add_options()("checkpoint", "checkpoint directory", cxxopts::value<std::string>())(
      "text", "input text", cxxopts::value<std::string>())(
      "tokens-file", "llm.c .bin shard; its first T tokens are used",
      cxxopts::value<std::string>())("max-len", "max sequence length (default: model seq_len); also --T or -T",
                                     cxxopts::value<int>())(
      "out", "output JSON file (default stdout)", cxxopts::value<std::string>())(
      "dump-map", "LAYER,HEAD: also write this head's maps into the JSON",
      cxxopts::value<std::string>())("h,help", "show help");
  alias_flag(argc, argv, "--T", "--max-len");
  alias_flag(argc, argv, "-T", "--max-len");
  auto r = opts.parse(argc, argv);
  if (r.count("help") || !r.count("checkpoint") || (!r.count("text") && !r.count("tokens-file"))) {
    std::cout << opts.help() << "\n";
    return r.count("help") ? 0 : 2;
  }
  const std::string dir = r["checkpoint"].as<std::string>();
  Config cfg = config_from_json(read_checkpoint_state(dir).config, dir + "/state.json");
  const int T_max = r.count("max-len") ? r["max-len"].as<int>() : cfg.model.seq_len;
  TDA_CHECK(T_max >= 1, "diag: --T must be >= 1");
  std::vector<int32_t> tokens;
  if (r.count("tokens-file")) {
    const auto sh = read_shard(r["tokens-file"].as<std::string>(), cfg.model.real_vocab_size);
    for (size_t i = 0; i < sh.size() && int(tokens.size()) < T_max; ++i)
      tokens.push_back(int32_t(sh[i]));
  } else {
    const auto tok = Gpt2Tokenizer::load(Gpt2Tokenizer::default_dir());
    tokens = tok.encode(r["text"].as<std::string>());
    if (int(tokens.size()) > T_max) tokens.resize(size_t(T_max));
  }
  TDA_CHECK(!tokens.empty(), "diag: no tokens");
  DiagOptions o;
  if (r.count("dump-map")) {
    const std::string s = r["dump-map"].as<std::string>();
    const auto comma = s.find(',');
    TDA_CHECK(comma != std::string::npos, "diag: --dump-map wants LAYER,HEAD");
    o.dump_layer = std::stoi(s.substr(0, comma));
    o.dump_head = std::stoi(s.substr(comma + 1));
  }
  CpuOps cpu;
  ProbeOps probe(cpu);
  GPT2 model(cfg.model, cfg.attention, probe);
  load_checkpoint(dir, model, nullptr, nullptr);
  json out = run_diagnostics(model, probe, tokens, o);
  out["checkpoint"] = dir;
  if (r.count("out")) {
    std::ofstream f(r["out"].as<std::string>());
    TDA_CHECK(bool(f), "diag: cannot write " + r["out"].as<std::string>());
    f << out.dump(1) << "\n";
  } else {
    std::cout << out.dump(1) << std::endl;
  }
  return 0;
}

RegisterCommand reg("diag", "attention diagnostics of a checkpoint on one sequence", cmd_diag);

}  // namespace
}  // namespace tda
