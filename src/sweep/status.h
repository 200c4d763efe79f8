// The sweep's record of itself, <sweep>/status.json (read by scripts/report.py, docs/sweeps.md):
//   {"sweep": name, "updated": unix time, "runs": {<run>: {"state", "group", "step",
//    "max_steps", "error", "train_seconds", "evals": {<eval>: state}, "eval_errors": {...},
//    "eval_notes": {...}}}}
// run state: pending | training | evaluating | done | failed | blocked | interrupted;
// eval state: done | skipped (eval_notes says why) | failed (eval_errors) | interrupted.
// Everything in it is derived from the run directories again when a sweep resumes; it is
// written (atomically) after every change so that a user can watch it.
#pragma once
#include <map>
#include <string>

#include "core/config.h"

namespace tda {

struct RunStatus {
  std::string state = "pending", group, error;
  int step = 0, max_steps = 0;
  double train_seconds = 0;
  std::map<std::string, std::string> evals, eval_errors, eval_notes;
  json to_json() const;
};

// The last `train` record of a run's metrics.jsonl (read from its tail; a line cut by a kill
// is ignored). step < 0 when there is none.
struct TrainProgress {
  int step = -1;
  double loss = 0, ms = 0;
};
TrainProgress last_train_record(const std::string& metrics_path);

// Seconds as "1h02m", "4m05s", "12s".
std::string fmt_seconds(double s);

}  // namespace tda
