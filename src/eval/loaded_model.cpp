#include "eval/loaded_model.h"

#include "backend/make_ops.h"
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
  lm.model = std::make_unique<GPT2>(lm.cfg.model, lm.cfg.attention, ops, dev.dtype);
  // the checkpoint's attention.impl; a vendor that fails its self-check leaves the calls to ours
  ops.set_attention_impl(
      {lm.cfg.attention.impl, false, lm.cfg.attention.kind, lm.model->attention().math()});
  load_checkpoint(dir, *lm.model);
  lm.model->set_step(st.step);
  return lm;
}

}  // namespace tda
