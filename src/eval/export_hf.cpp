#include "eval/export_hf.h"

#include <filesystem>

#include "core/error.h"
#include "core/fs.h"
#include "core/safetensors.h"
#include "data/tokenizer.h"
#include "eval/loaded_model.h"

namespace tda {

namespace fs = std::filesystem;

namespace {

void copy_into(const fs::path& src, const fs::path& dst) {
  TDA_CHECK(fs::exists(src), "export: missing " + src.string());
  std::vector<char> b = read_file_bytes(src.string());
  write_file_durable(dst.string(), std::string(b.begin(), b.end()));
}

json hf_config(const LoadedModel& lm) {
  json c = lm.cfg.raw.at("model");  // n_layer, d_model, ... flat, as configuration_tda.py reads
  c["attention"] = lm.cfg.raw.at("attention");
  c["step"] = lm.step;
  c["model_type"] = "tda_gpt2";
  c["architectures"] = {"TdaForCausalLM"};
  c["auto_map"] = {{"AutoConfig", "configuration_tda.TdaConfig"},
                   {"AutoModelForCausalLM", "modeling_tda.TdaForCausalLM"}};
  c["torch_dtype"] = "float32";
  c["tie_word_embeddings"] = false;
  c["bos_token_id"] = 50256;
  c["eos_token_id"] = 50256;
  return c;
}

}  // namespace

void export_hf(const ExportOptions& o) {
  TDA_CHECK(!o.checkpoint.empty() && !o.out.empty(), "export: --checkpoint and --out are required");
  LoadedModel lm = load_model_for_eval(o.checkpoint);
  make_dirs(o.out);
  const fs::path out(o.out);
  std::vector<TensorRef> refs;
  for (const auto& t : lm.model->tensors())
    refs.push_back({t.name, t.shape, lm.model->params() + t.offset});
  write_safetensors((out / "model.safetensors").string(), refs,
                    {{"format", "pt"}, {"producer", "tda export"}});
  write_file_durable((out / "config.json").string(), hf_config(lm).dump(2) + "\n");
  for (const char* f : {"modeling_tda.py", "configuration_tda.py"})
    copy_into(fs::path(o.python_dir) / f, out / f);
  // GPT-2 BPE files under their Hugging Face names (same contents), so AutoTokenizer works.
  const fs::path tok(o.tokenizer_dir.empty() ? Gpt2Tokenizer::default_dir() : o.tokenizer_dir);
  if (fs::exists(tok / "encoder.json") && fs::exists(tok / "vocab.bpe")) {
    copy_into(tok / "encoder.json", out / "vocab.json");
    copy_into(tok / "vocab.bpe", out / "merges.txt");
    json tc = {{"tokenizer_class", "GPT2Tokenizer"}, {"model_max_length", lm.cfg.model.seq_len},
               {"bos_token", "<|endoftext|>"},       {"eos_token", "<|endoftext|>"},
               {"unk_token", "<|endoftext|>"},       {"add_prefix_space", false}};
    write_file_durable((out / "tokenizer_config.json").string(), tc.dump(2) + "\n");
  }
}

}  // namespace tda
