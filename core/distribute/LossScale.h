// Keras' dynamic loss scaling (LossScaleOptimizer) as the mirrored step runs it, for mixed_float16:
// the scale the loss gradient is multiplied by, halved after a step whose summed gradients held an
// inf/NaN (that step's update skipped on every replica), doubled after growthSteps finite steps in
// a row. Decided once per step, on the all-reduced gradients every replica shares.
#pragma once
#include <cstdint>

#include "nn/Precision.h"

namespace ml {

class DynamicLossScale {
 public:
  DynamicLossScale() = default;  // float32: inactive
  // Active for mixed_float16 with loss scaling on; throws UserError for an initial scale a float
  // cannot hold or a growth period under 1 step.
  DynamicLossScale(Precision precision, const LossScaling& options);

  bool active() const { return active_; }
  double scale() const { return active_ ? scale_ : 0.0; }  // the next step's (0 when inactive)
  int64_t goodSteps() const { return goodSteps_; }         // finite steps since it last changed
  // A resumed run goes on with its checkpoint's scale (ignored when inactive).
  void restore(double scale, int64_t goodSteps);

  // What a step of `samples` multiplies by: the loss gradient (loss) and the summed gradients in
  // the update (grad), which makes them the mean gradient. Under float16 backward's values are
  // rounded, so they must be those a framework has: of the global batch's mean loss (Keras'
  // SUM_OVER_BATCH_SIZE, PyTorch's mean) times the scale, not of the per-sample sum, which would be
  // B times larger and underflow B times less. float32 and bfloat16 keep the sums (1/B in the update).
  struct StepFactors {
    float loss = 1, grad = 1;
  };
  StepFactors factors(int64_t samples) const;

  // After an active step: halves on a skipped one (never below 1), or counts a finite one and
  // doubles after growthSteps of them (while a float holds it).
  void afterStep(bool skipped);

 private:
  bool active_ = false, halfPrecision_ = false;
  double scale_ = 1;
  int64_t growthSteps_ = 2000;
  int64_t goodSteps_ = 0;
};

}  // namespace ml
