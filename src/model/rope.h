// RoPE tables shared by the model (training length) and the generator (any decoding length).
#pragma once
#include <vector>

#include "core/config.h"

namespace tda {

// cos/sin (T_max, head_dim/2): angle(t, i) = t * theta'^(-2i/D), pairs (c, c + D/2).
// NTK-aware scaling (context extension by factor s = model.rope_ntk_factor) raises the base:
// theta' = theta * s^(D/(D-2)), stretching low frequencies while keeping high ones. Row t does
// not depend on T_max, so a longer table extends a shorter one.
void build_rope_tables(const ModelConfig& m, int T_max, std::vector<float>& cos,
                       std::vector<float>& sin);
// Floats of each of the two tables up to T_max (what build_rope_tables makes).
size_t rope_table_floats(const ModelConfig& m, int T_max);

// Longest context the model's own tables cover: seq_len * max(1, rope_ntk_factor).
int rope_trained_context(const ModelConfig& m);

}  // namespace tda
