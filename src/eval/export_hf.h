// `tda export --format hf`: a checkpoint as a Hugging Face-style directory that PyTorch can run
// without this project (docs/evaluation.md):
//   config.json        model_type "tda_gpt2", auto_map, every model/attention option, step
//   model.safetensors  fp32, the checkpoint's tensor names and layouts (docs/checkpoints.md)
//   modeling_tda.py, configuration_tda.py   copied from python/tda_hf/ (dense PyTorch model of
//                      all eleven mechanisms; transformers optional)
//   vocab.json, merges.txt, tokenizer_config.json   GPT-2 BPE, when the tokenizer files exist
#pragma once
#include <string>

namespace tda {

struct ExportOptions {
  std::string checkpoint;  // checkpoint directory (holds state.json, model.safetensors)
  std::string out;         // export directory (created; existing files are overwritten)
  std::string python_dir = std::string(TDA_SOURCE_DIR) + "/python/tda_hf";
  std::string tokenizer_dir;  // "" = Tokenizer::default_dir(); skipped if absent
};

void export_hf(const ExportOptions& o);

}  // namespace tda
