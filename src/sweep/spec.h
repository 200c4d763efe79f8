// A sweep is data (docs/sweeps.md): a JSON spec naming a default config, overrides for every
// run, a list of named runs (each its own overrides, optional config file, group, and optional
// `init_from` another run of the sweep), and the evaluation protocol. load_sweep() reads it
// strictly (an unknown key or a wrong type is an error naming the key path), resolves every
// run's config exactly as `tda train` would (so a bad override fails before anything runs), and
// orders nothing: runs keep the spec's order, and a run waits for the run it starts from.
#pragma once
#include <string>
#include <vector>

#include "core/config.h"

namespace tda {

struct SweepRun {
  std::string name, group;        // group: main | p | beta | extension | any label (docs/report.md)
  std::string config;             // the config file (the spec's default unless the run names one)
  std::vector<std::string> sets;  // --set key=value for tda train: the spec's, then the run's
  std::string init_from;          // name of another run of this sweep, or ""
  Config cfg;                     // resolved (without init_from, which the runner adds)
};

// What the command line changes (tda sweep flags).
struct SweepOverrides {
  std::string config;             // --config: replaces the spec's default config
  std::vector<std::string> sets;  // --set: after the spec's and the run's own
  std::string eval_data, scrolls_data, device, dtype;
};

struct Sweep {
  std::string name, spec_path;
  std::vector<SweepRun> runs;
  json eval;  // the evaluation block, defaults filled in (sweep_defaults()["eval"])
  json raw;   // the spec as written, defaults filled in (copied into sweep.json)
};

// Every legal key of a spec, with its default (and so its type); "runs" entries follow
// sweep_run_defaults(). docs/sweeps.md documents each.
const json& sweep_defaults();
const json& sweep_run_defaults();

Sweep load_sweep(const std::string& spec_path, const SweepOverrides& o = {});

// Whether `group` is listed in an evaluation block's "groups" (an empty list: every group).
bool eval_applies(const json& block, const std::string& group);

}  // namespace tda
