// Runs a sweep (docs/sweeps.md): every run is `tda train` in <out>/<run>/ (resumed with
// --resume auto; a finished run is skipped), then its evaluations (src/sweep/evals.h), each a
// `tda` child process whose result is renamed into place only when it succeeded (so a file that
// exists is never recomputed). A failed run or evaluation is recorded in status.json and the
// rest go on; a run whose init_from failed is blocked. SIGINT/SIGTERM: the running children are
// interrupted once (training checkpoints), the sweep exits 130, and the same command resumes.
#pragma once
#include <string>
#include <vector>

#include "sweep/spec.h"

namespace tda {

struct SweepOptions {
  std::string out_dir;            // the sweep directory ("" = runs/<name>)
  int gpus = 0;                   // passed to every tda train as --gpus N
  int parallel = 1;               // runs at once (CPU: OMP threads divided among them)
  bool dry_run = false;           // print the plan, run nothing
  bool no_eval = false;           // train only
  std::vector<std::string> only;  // these runs only (others are left as they are)
  double progress_every = 60;     // seconds between progress lines when stderr is not a terminal
};

// Returns the exit code: 0 when every selected run trained and no evaluation failed, 1 when
// something failed or was blocked, 130 after an interrupt.
int run_sweep(const Sweep& sweep, const SweepOptions& o);

}  // namespace tda
