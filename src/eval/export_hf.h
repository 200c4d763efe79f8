// `tda export --format hf`: a checkpoint as a Hugging Face-style directory that PyTorch can run
// without this project (docs/evaluation.md):
//   config.json        model_type "tda_gpt2", auto_map, every model/attention option, step
//   model.safetensors  fp32, the checkpoint's tensor names and layouts (docs/checkpoints.md)
//   modeling_tda.py, configuration_tda.py   copied from python/tda_hf/ (dense PyTorch model of
//                      all eleven mechanisms; transformers optional)
//   vocab.json, merges.txt, tokenizer_config.json   GPT-2 BPE, when the tokenizer files exist
#pragma once
#include <string>
#include <vector>

namespace tda {

struct ExportOptions {
  std::string checkpoint;  // checkpoint directory (holds state.json, model.safetensors)
  std::string out;         // export directory: created, or empty (unless overwrite)
  // An `out` that holds files is refused unless this is set: then the files an export writes
  // (export_files()) are deleted first; other files there stay.
  bool overwrite = false;
  std::string python_dir = std::string(TDA_SOURCE_DIR) + "/python/tda_hf";
  std::string tokenizer_dir;  // "" = Tokenizer::default_dir(); skipped if absent
};

void export_hf(const ExportOptions& o);
// The names export_hf writes into `out`.
const std::vector<std::string>& export_files();

}  // namespace tda
