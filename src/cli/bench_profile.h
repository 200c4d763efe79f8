// `tda bench train --profile`: the ProfileOps table of a training step, by phase and op.
#pragma once
#include <ostream>

#include "backend/profile_ops.h"
#include "core/config.h"

namespace tda {

// Names the model's four matmul shapes (c_attn, c_proj, c_fc, mlp_proj) in the profile.
void name_matmuls(ProfileOps& p, const ModelConfig& m, int proj_width);
// Per step: [{phase, op, calls, ms}], ops and each phase's "(outside ops)" time.
json profile_json(const ProfileOps& p, int steps);
// The same as a table, largest first within each phase, with each line's share of the step.
void print_profile(std::ostream& os, const ProfileOps& p, int steps, double step_ms);

}  // namespace tda
