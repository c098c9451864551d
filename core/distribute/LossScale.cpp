#include "distribute/LossScale.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "Error.h"

namespace ml {

DynamicLossScale::DynamicLossScale(Precision precision, const LossScaling& options)
    : active_(precision == Precision::MixedFloat16 && options.enabled),
      halfPrecision_(precision == Precision::MixedFloat16),
      growthSteps_(options.growthSteps) {
  if (!active_) return;
  if (!(options.initial > 0 && std::isfinite(static_cast<float>(options.initial))))
    throw UserError("the initial loss scale must be a positive number a float can hold (32768 by default), got " +
                    std::to_string(options.initial));
  if (options.growthSteps < 1)
    throw UserError("the loss scale's growth period must be at least 1 step, got " + std::to_string(options.growthSteps));
  scale_ = options.initial;
}

void DynamicLossScale::restore(double scale, int64_t goodSteps) {
  if (!active_) return;
  scale_ = scale;
  goodSteps_ = goodSteps;
}

DynamicLossScale::StepFactors DynamicLossScale::factors(int64_t samples) const {
  if (!halfPrecision_) return {1.0f, 1.0f / static_cast<float>(samples)};
  const double s = active_ ? scale_ : 1.0;
  return {static_cast<float>(s / static_cast<double>(samples)), static_cast<float>(1.0 / s)};
}

void DynamicLossScale::afterStep(bool skipped) {
  if (skipped) {
    scale_ = std::max(1.0, scale_ / 2);
    goodSteps_ = 0;
  } else if (++goodSteps_ >= growthSteps_) {
    if (std::isfinite(static_cast<float>(scale_ * 2))) scale_ *= 2;
    goodSteps_ = 0;
  }
}

}  // namespace ml
