// Learning-rate schedule: linear warmup from lr/warmup to lr over `warmup` steps, then cosine
// decay from lr to min_lr at max_steps (step is 0-based; the first step uses lr/warmup).
#pragma once
#include <cmath>

namespace tda {

inline double learning_rate(int step, double lr, double min_lr, int warmup, int max_steps) {
  if (step < warmup) return lr * double(step + 1) / double(warmup);
  if (step >= max_steps) return min_lr;
  double progress = double(step - warmup) / double(std::max(1, max_steps - warmup));
  return min_lr + 0.5 * (1.0 + std::cos(M_PI * progress)) * (lr - min_lr);
}

}  // namespace tda
