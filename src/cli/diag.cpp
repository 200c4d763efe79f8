// tda diag --checkpoint DIR (--text "..." | --tokens-file SHARD [--sequences N]) [--T N]
//          [--max-context N] [--untrained] [--out FILE.json] [--dump-map LAYER,HEAD]
// Attention diagnostics of docs/attention.md §13 and the paper's Appendix C, averaged over
// sequences (B = 1, eval mode): per layer and head, per view and for the effective map:
// sparsity, max |A|, gSinkRatio(1), entropy, survivors, dead rows; curves over context length;
// raw-score tails; cross-view correlation. docs/diagnostics.md. [--device cpu|cuda]
// [--dtype fp32|bf16]: the model's forward runs there; the maps are rebuilt on the host.
#include <cxxopts.hpp>
#include <fstream>
#include <iostream>

#include "cli/command.h"
#include "cli/device_flags.h"
#include "core/error.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "eval/diagnostics.h"
#include "eval/loaded_model.h"
#include "model/generator.h"
#include "train/checkpoint.h"

namespace tda {
namespace {

int cmd_diag(int argc, char** argv) {
  cxxopts::Options opts(argv[0], "Attention diagnostics (sparsity, max|A|, gSinkRatio, entropy)");
  opts.add_options()("checkpoint", "checkpoint directory", cxxopts::value<std::string>())(
      "text", "input text", cxxopts::value<std::string>())(
      "tokens-file", "llm.c .bin shard; its first N x T tokens are used (--sequences)",
      cxxopts::value<std::string>())("max-len",
                                     "max sequence length (default: model seq_len); also --T or -T",
                                     cxxopts::value<int>())(
      "out", "output JSON file (default stdout)", cxxopts::value<std::string>())(
      "dump-map", "LAYER,HEAD: also write this head's maps into the JSON",
      cxxopts::value<std::string>())(
      "sequences", "--tokens-file: average over N consecutive windows of T tokens",
      cxxopts::value<int>()->default_value("1"))(
      "max-context", "RoPE tables up to N (NTK factor applied): T may go past the trained length",
      cxxopts::value<int>()->default_value("0"))(
      "untrained", "the checkpoint's config at initialisation (train.seed), not its weights")(
      "h,help", "show help");
  add_device_flags(opts);
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
  const int n_seq = r["sequences"].as<int>();
  TDA_CHECK(n_seq >= 1, "diag: --sequences must be >= 1");
  std::vector<std::vector<int32_t>> seqs;
  if (r.count("tokens-file")) {
    const std::string file = r["tokens-file"].as<std::string>();
    const auto sh = read_shard(file, cfg.model.real_vocab_size);
    const size_t T = std::min(size_t(T_max), sh.size());
    TDA_CHECK(T >= 1 && sh.size() >= T * n_seq,
              "diag: " + file + " holds " + std::to_string(sh.size()) + " tokens, fewer than " +
                  std::to_string(n_seq) + " sequences of " + std::to_string(T));
    for (int s = 0; s < n_seq; ++s)
      seqs.emplace_back(sh.begin() + long(s * T), sh.begin() + long((s + 1) * T));
  } else {
    TDA_CHECK(n_seq == 1, "diag: --sequences needs --tokens-file");
    const auto tok = Gpt2Tokenizer::load(Gpt2Tokenizer::default_dir());
    seqs.push_back(tok.encode(r["text"].as<std::string>()));
    if (int(seqs[0].size()) > T_max) seqs[0].resize(size_t(T_max));
  }
  TDA_CHECK(!seqs[0].empty(), "diag: no tokens");
  DiagOptions o;
  if (r.count("dump-map")) {
    const std::string s = r["dump-map"].as<std::string>();
    const auto comma = s.find(',');
    TDA_CHECK(comma != std::string::npos, "diag: --dump-map wants LAYER,HEAD");
    o.dump_layer = std::stoi(s.substr(0, comma));
    o.dump_head = std::stoi(s.substr(comma + 1));
  }
  const EvalDevice dev = device_flags(r);
  // The checkpoint's weights and step (dex anneals its lambda with the step).
  LoadedModel lm = load_model_for_eval(dir, dev, [](Ops& backend) -> std::unique_ptr<Ops> {
    return std::make_unique<ProbeOps>(backend);
  });
  GPT2& model = *lm.model;
  const bool untrained = r.count("untrained") > 0;
  o.max_context = r["max-context"].as<int>();
  {
    // One prefill of T rows with RoPE tables up to the context, and every head's T x T maps
    // (three for a two-view kind: each view and the effective map) on the host.
    const size_t T = seqs[0].size();
    MemoryNeed need = Generator::memory_need(model, std::max(o.max_context, int(T)), int(T));
    need.host += (attn_two_views(model.attention().math()) ? 3 : 1) * T * T * sizeof(float);
    require_memory(model.ops(), need,
                   "diag: --T " + std::to_string(T) +
                       (o.max_context > 0 ? " --max-context " + std::to_string(o.max_context)
                                          : std::string()));
  }
  if (untrained) {
    model.init_weights(cfg.train.seed, cfg.train.init_scheme);  // what `tda train` starts from
    model.set_step(0);
  }
  json out = run_diagnostics(model, static_cast<ProbeOps&>(*lm.decorator), seqs, o);
  out["checkpoint"] = dir;
  out["device"] = dev.device;
  out["dtype"] = dev.dtype;
  out["untrained"] = untrained;
  out["step"] = untrained ? 0 : model.step();
  out["attention"] = cfg.raw["attention"];
  if (r.count("out")) {
    std::ofstream f(r["out"].as<std::string>());
    TDA_CHECK(bool(f), "diag: cannot write " + r["out"].as<std::string>());
    f << out.dump(1) << "\n";
  } else {
    std::cout << out.dump(1) << std::endl;
  }
  return 0;
}

RegisterCommand reg("diag", "attention diagnostics of a checkpoint, averaged over sequences",
                    cmd_diag);

}  // namespace
}  // namespace tda
