#include "eval/loaded_model.h"

#include "train/checkpoint.h"

namespace tda {

LoadedModel load_model_for_eval(const std::string& dir) {
  LoadedModel lm;
  TrainState st = read_checkpoint_state(dir);
  lm.cfg = config_from_json(st.config, dir + "/state.json");
  lm.step = st.step;
  lm.ops = std::make_unique<CpuOps>();
  lm.model = std::make_unique<GPT2>(lm.cfg.model, lm.cfg.attention, *lm.ops);
  load_checkpoint(dir, *lm.model, nullptr, nullptr);
  lm.model->set_step(st.step);
  return lm;
}

}  // namespace tda
