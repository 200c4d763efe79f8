// Fault injection for crash-consistency tests: with TDA_FAULT=<site>:<n> in the environment,
// the n-th time the process passes fault_point("<site>") it kills itself with SIGKILL (exactly
// what `kill -9` or an OOM killer does: no destructors, no flushing). Without TDA_FAULT it
// costs one comparison. Sites are named where they are placed (checkpoint writing, pruning).
#pragma once

namespace tda {

void fault_point(const char* site);

}  // namespace tda
