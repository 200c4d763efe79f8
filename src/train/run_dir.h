// A run directory as `tda train` owns it (docs/checkpoints.md): one writer at a time, what
// counts as "a run is here", and the evidence that a run once had checkpoints.
#pragma once
#include <string>
#include <vector>

#include "core/file_lock.h"

namespace tda {

// What a run writes into its directory: a fresh start refuses a directory holding any of them,
// --overwrite deletes exactly these. Anything else there (the lock, the launcher's .workers, the
// sweep's logs, a user's files) is neither a reason to refuse nor deleted.
const std::vector<std::string>& run_files();
// Those of run_files() present in `dir`, comma-separated ("" when none).
std::string run_files_in(const std::string& dir);

// The lock file of a run directory.
std::string run_lock_path(const std::string& dir);
// Creates `dir` and takes its lock for this process's life (core/file_lock.h); `inherit`: the
// children it starts share it (the data-parallel launchers' workers). Another holder is a
// one-line error naming its pid and host. A file system without locks is a warning, not an
// error: refusing would make such file systems unusable (docs/checkpoints.md).
FileLock lock_run_dir(const std::string& dir, bool inherit = false);

// Evidence that the run in `dir` wrote checkpoints at some point: a `checkpoint` record in its
// metrics.jsonl, or a checkpoint kept aside as `step_N.corrupt`. "" when there is none; else a
// description for the error that refuses to start such a run over ("metrics.jsonl records a
// checkpoint at step 40; kept aside: step_00000040.corrupt").
std::string checkpoint_evidence(const std::string& dir);

}  // namespace tda
