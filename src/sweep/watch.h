// A sweep that outlives its terminal, and a look at one from anywhere (docs/sweeps.md, "Long
// studies"). `tda sweep --detach` starts the same sweep as a daemon (a new session, so a
// closed terminal or a killed shell sends it nothing; its output in <sweep>/sweep.out) and
// returns; `tda sweep status` reads the sweep directory: each run's state, the step and ETA of
// the ones training, and whether the sweep's process is alive.
#pragma once
#include <string>
#include <vector>

namespace tda {

// Starts `tda <args>` (a sweep command without --detach) detached: setsid, a second fork (so it
// can never regain a terminal), stdin /dev/null, stdout and stderr appended to
// <dir>/sweep.out. Refuses when a sweep already holds <dir>/.lock. Returns the daemon's pid.
int detach_sweep(const std::string& dir, const std::vector<std::string>& args);

// The state of the sweep in `dir` (its sweep.json, status.json, the runs' metrics.jsonl and
// the lock), as lines for a terminal. Throws naming the directory when no sweep ran there.
std::string sweep_status_text(const std::string& dir);

// Whether the sweep's own process (sweep.pid) is alive and holds <dir>/.lock.
bool sweep_alive(const std::string& dir, int* pid = nullptr);

}  // namespace tda
