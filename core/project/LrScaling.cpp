// The learning-rate scaling rule and its sentence.
#include "project/LrScaling.h"

#include <cmath>
#include <cstdio>

#include "Format.h"
#include "Names.h"
#include "project/Project.h"

namespace ml {

const char* toString(LrRule r) {
  switch (r) {
    case LrRule::None: return "none";
    case LrRule::Linear: return "linear";
    case LrRule::Sqrt: return "sqrt";
  }
  return "";
}

std::optional<LrRule> parseLrRule(std::string_view name) {
  const LrRule all[] = {LrRule::None, LrRule::Linear, LrRule::Sqrt};
  return fromName(name, all);
}

int64_t lrReferenceBatch(const TrainingSpec& t) { return t.lrReferenceBatch > 0 ? t.lrReferenceBatch : t.batchSize; }

double lrScaleFactor(LrRule rule, double globalBatch, double referenceBatch) {
  if (referenceBatch <= 0 || globalBatch <= 0) return 1.0;
  const double ratio = globalBatch / referenceBatch;
  if (rule == LrRule::Linear) return ratio;
  if (rule == LrRule::Sqrt) return std::sqrt(ratio);
  return 1.0;
}

LrScaling scaleLearningRate(const TrainingSpec& t, int64_t globalBatch) {
  LrScaling s;
  s.rule = t.lrScaling;
  s.baseLr = t.optimizer.learningRate;
  s.referenceBatch = lrReferenceBatch(t);
  s.globalBatch = globalBatch;
  s.factor = lrScaleFactor(s.rule, static_cast<double>(globalBatch), static_cast<double>(s.referenceBatch));
  s.lr = s.baseLr * s.factor;
  return s;
}

std::string LrScaling::explain() const {
  const std::string set = shortNumber(baseLr) + " was set for a global batch of " + std::to_string(referenceBatch);
  if (rule == LrRule::None) {
    if (globalBatch == referenceBatch) return shortNumber(lr) + " (no scaling rule; " + set + ", the batch of this run)";
    return shortNumber(lr) + " (no scaling rule: " + set + " but the global batch is " + std::to_string(globalBatch) + ")";
  }
  if (globalBatch == referenceBatch)
    return shortNumber(lr) + " (" + set + " and the global batch is still " + std::to_string(globalBatch) + ", so " +
           toString(rule) + " scaling changes nothing)";
  return shortNumber(lr) + " (" + set + "; the global batch is " + std::to_string(globalBatch) + ", so " + toString(rule) +
         " scaling gives " + shortNumber(baseLr) + " x " + shortNumber(factor) + " = " + shortNumber(lr) + ")";
}

std::string lrScalingPython() {
  return "{\"none\": 1.0, \"linear\": global_batch / REFERENCE_BATCH, \"sqrt\": math.sqrt(global_batch / "
         "REFERENCE_BATCH)}[LR_SCALING]";
}

}  // namespace ml
