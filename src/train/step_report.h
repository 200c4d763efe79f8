// What a training step reports (docs/tracking.md): the `train` record of metrics.jsonl (the
// step's loss, lr, gradient norm and speed, with tokens seen, MFU, host and device memory and
// the ETA) and the step line printed from it.
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "backend/ops.h"
#include "core/config.h"

namespace tda {

struct StepMetrics {
  int step;
  double loss, lr, grad_norm, ms, tokens_per_s;
};

class StepReport {
 public:
  // MFU's denominator: log.peak_tflops, else the peak of the backend's device by its name and
  // train.dtype (backend/peak_flops.h); none when neither is known. `ranks`: one device each.
  StepReport(const Config& cfg, double flops_per_token, Ops& ops, int ranks);
  // The start-up line that says what MFU is measured against, or that there is none.
  std::string mfu_basis() const;
  // The train record of a finished step (memory read now; the device's peak is the most seen
  // at a step's end).
  nlohmann::json record(const StepMetrics& sm, double eta_s);
  // "step 20/100 | loss ... | eta 0h01m02s" from a record.
  static std::string line(const nlohmann::json& record, int last_step);

 private:
  Ops& ops_;
  long batch_tokens_;
  int ranks_;
  double flops_per_token_, peak_flops_;  // peak of one device, FLOP/s; 0: not known
  bool peak_from_config_;
  std::string device_name_, dtype_;
  size_t device_peak_ = 0;
};

}  // namespace tda
