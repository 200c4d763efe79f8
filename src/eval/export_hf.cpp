#include "eval/export_hf.h"

#include <filesystem>

#include "attention/registry.h"
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
  // One layer's shape as the variant declares it: modeling_tda.py builds c_attn and the kind's
  // tensors from this, not from a per-kind table of its own (every layer has the same tensors).
  const auto attn = make_attention(lm.cfg.model, lm.cfg.attention);
  json params = json::array();
  for (const ParamSpec& p : attn->extra_params(0)) {
    const bool constant = p.init == ParamSpec::Init::kConst || p.init == ParamSpec::Init::kOnes;
    const float init = p.init == ParamSpec::Init::kOnes ? 1.f : constant ? p.a : 0.f;
    params.push_back({{"name", p.name}, {"shape", p.shape}, {"init", init}});
  }
  c["attention_layout"] = {{"proj_width", attn->proj_width()}, {"params", params}};
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

const std::vector<std::string>& export_files() {
  static const std::vector<std::string> names = {
      "model.safetensors", "config.json", "configuration_tda.py", "modeling_tda.py",
      "vocab.json",        "merges.txt",  "tokenizer_config.json"};
  return names;
}

void export_hf(const ExportOptions& o) {
  TDA_CHECK(!o.checkpoint.empty() && !o.out.empty(), "export: --checkpoint and --out are required");
  // Checked before anything is read: an export must not replace another one's files silently
  // (a half-replaced directory would mix two checkpoints).
  std::error_code ec;
  TDA_CHECK(!fs::exists(o.out, ec) || fs::is_directory(o.out, ec),
            "export: --out " + o.out + " exists and is not a directory");
  if (fs::is_directory(o.out, ec) && !fs::is_empty(o.out, ec)) {
    std::string held;
    int n = 0;
    for (const auto& e : fs::directory_iterator(o.out, ec))
      if (++n <= 4) held += std::string(held.empty() ? "" : ", ") + e.path().filename().string();
    if (n > 4) held += ", ...";
    TDA_CHECK(o.overwrite, "export: --out " + o.out + " is not empty (" + held +
                               "): pass --overwrite to replace an earlier export there, or pick "
                               "a fresh directory");
  }
  LoadedModel lm = load_model_for_eval(o.checkpoint);
  if (o.overwrite)
    for (const auto& name : export_files()) remove_tree((fs::path(o.out) / name).string());
  make_dirs(o.out);
  const fs::path out(o.out);
  std::vector<TensorRef> refs;
  for (const auto& t : lm.model->tensors())
    refs.push_back({t.name, t.shape, lm.model->params() + t.offset});
  write_safetensors((out / "model.safetensors").string(), refs,
                    {{"format", "pt"}, {"producer", "tda export"}});
  write_file_durable((out / "config.json").string(), hf_config(lm).dump(2) + "\n");
  copy_into(fs::path(o.python_dir) / "configuration_tda.py", out / "configuration_tda.py");
  // modeling_tda.py, plus the forward of a kind that brings its own (AttentionKindInfo).
  const fs::path py = fs::path(o.python_dir) / "modeling_tda.py";
  TDA_CHECK(fs::exists(py), "export: missing " + py.string());
  const std::vector<char> b = read_file_bytes(py.string());
  std::string modeling(b.begin(), b.end());
  const std::string& kind = lm.cfg.attention.kind;
  const std::string& fwd = attention_registry().at(kind).info.torch_forward;
  if (!fwd.empty())
    modeling += "\n\n# attention.kind \"" + kind + "\": its forward, from its C++ descriptor\n" +
                "Attention._" + kind + " = lambda self, proj, ctx: " + fwd + "\n";
  write_file_durable((out / "modeling_tda.py").string(), modeling);
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
