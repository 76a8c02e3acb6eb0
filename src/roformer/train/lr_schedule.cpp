// Learning-rate schedule (see lr_schedule.h).
#include "roformer/train/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace roformer::train {

double learning_rate(const config::TrainConfig& t, int64_t step) {
  const double peak = t.lr, floor = t.lr * t.min_lr_ratio;
  // Warmup: step 0 already gets lr / warmup so no step is wasted at rate 0.
  if (step < t.warmup_steps) return peak * static_cast<double>(step + 1) / static_cast<double>(t.warmup_steps);
  if (t.schedule == config::LrSchedule::constant) return peak;
  const int64_t decay_steps = t.steps - t.warmup_steps;
  if (decay_steps <= 1) return peak;
  const double progress =
      std::clamp(static_cast<double>(step - t.warmup_steps) / static_cast<double>(decay_steps - 1), 0.0, 1.0);
  if (t.schedule == config::LrSchedule::linear) return peak + (floor - peak) * progress;
  return floor + 0.5 * (peak - floor) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace roformer::train
