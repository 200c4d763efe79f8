// The evaluations of one finished run, as `tda` commands (docs/sweeps.md has the table): each
// writes <run>/eval/<name>.json, the file names docs/report.md reads. A step whose data is not
// there is skipped with the reason, not failed.
#pragma once
#include <string>
#include <vector>

#include "sweep/spec.h"

namespace tda {

struct EvalStep {
  std::string name;  // val, mc_<task>, diag, diag_init, diag_long, passkey_n<k>, scrolls_<task>
  std::vector<std::string> args;  // `tda` arguments (without the binary), --out not included
  std::string skip;               // why it does not run ("" = it runs)
};

// `checkpoint`: the run's final checkpoint directory. Data locations come from the eval block
// (mc.data: the ../shared/data/evals layout, via TDA_EVAL_DATA; scrolls.data:
// <task>/validation.jsonl) and the run's config (data.val for the loss and the diagnostics).
std::vector<EvalStep> plan_evals(const SweepRun& run, const json& eval,
                                 const std::string& checkpoint);

// The file a step writes: <run_dir>/eval/<name>.json.
std::string eval_file(const std::string& run_dir, const std::string& name);

}  // namespace tda
