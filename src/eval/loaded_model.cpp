#include "eval/loaded_model.h"

#include <filesystem>

#include "backend/make_ops.h"
#include "backend/memory_check.h"
#include "train/checkpoint.h"

namespace tda {

LoadedModel load_model_for_eval(const std::string& dir, const EvalDevice& dev,
                                const std::function<std::unique_ptr<Ops>(Ops&)>& decorate) {
  LoadedModel lm;
  TrainState st = read_checkpoint_state(dir);
  lm.cfg = config_from_json(st.config, dir + "/state.json");
  lm.step = st.step;
  lm.backend = make_ops(dev.device);
  if (decorate) lm.decorator = decorate(*lm.backend);
  Ops& ops = lm.decorator ? *lm.decorator : *lm.backend;
  // The model's size comes from state.json: a damaged or hand-edited one must not take the node.
  // Loading reads model.safetensors into host memory and keeps a host copy of the parameters.
  MemoryNeed need = GPT2::memory_need(lm.cfg.model, lm.cfg.attention, dev.dtype);
  std::error_code ec;
  const auto file = std::filesystem::file_size(dir + "/model.safetensors", ec);
  if (!ec) need.host += 2 * size_t(file);
  require_memory(ops, need,
                 "checkpoint " + dir + ": its model (model.n_layer " +
                     std::to_string(lm.cfg.model.n_layer) + ", model.d_model " +
                     std::to_string(lm.cfg.model.d_model) + ", model.vocab_size " +
                     std::to_string(lm.cfg.model.vocab_size) + " in state.json)");
  lm.model = std::make_unique<GPT2>(lm.cfg.model, lm.cfg.attention, ops, dev.dtype);
  // the checkpoint's attention.impl; a vendor that fails its self-check leaves the calls to ours.
  // The tuning table is this machine's (auto), not the training run's: that file may be on
  // another machine, or tuned for another GPU.
  ops.set_attention_impl({lm.cfg.attention.impl, false, lm.cfg.attention.kind,
                          lm.model->attention().math(), lm.cfg.attention.fwd_block_rows,
                          lm.cfg.attention.deterministic, "auto", lm.cfg.attention.fwd_block_keys,
                          lm.cfg.attention.bwd_stages});
  load_checkpoint(dir, *lm.model);
  lm.model->set_step(st.step);
  return lm;
}

}  // namespace tda
