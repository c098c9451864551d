// The run plan (RunPlan.h): batches, shards, steps per epoch and the learning-rate rule of a run.
#include "train/RunPlan.h"

#include <cstdio>
#include <sstream>

#include "Error.h"
#include "Field.h"
#include "Format.h"
#include "Limits.h"

namespace ml {

std::string RunPlan::sentence() const {
  std::ostringstream s;
  if (replicas == 1)
    s << "1 replica x " << globalBatch << " = " << globalBatch << " samples per step";
  else if (perReplicaBatch == smallestShard)
    s << replicas << " replicas x " << perReplicaBatch << " = " << microBatch << " samples per "
      << (accumulate > 1 ? "micro-batch" : "step");
  else
    s << replicas << " replicas x " << smallestShard << "-" << perReplicaBatch << " = " << microBatch << " samples per "
      << (accumulate > 1 ? "micro-batch" : "step");
  if (accumulate > 1) s << ", " << accumulate << " micro-batches = " << globalBatch << " samples per update";
  s << "; learning rate " << scaling.explain();
  if (warmupEpochs > 0) s << ", " << shortNumber(warmupEpochs) << " epoch" << (warmupEpochs == 1 ? "" : "s") << " warm-up";
  if (!lrDecayEpochs.empty()) s << ", then " << decayPhrase();
  return s.str();
}

std::string RunPlan::decayPhrase() const {
  if (lrDecayEpochs.empty()) return {};
  std::string after;
  for (size_t i = 0; i < lrDecayEpochs.size(); ++i)
    after += (i == 0 ? "" : i + 1 == lrDecayEpochs.size() ? " and " : ", ") + std::to_string(lrDecayEpochs[i]);
  return "multiplied by " + shortNumber(lrDecayFactor) + " after epoch" + (lrDecayEpochs.size() == 1 ? " " : "s ") + after;
}

RunPlan planRun(const Project& p, int replicas, int64_t trainSamples) {
  RunPlan plan;
  const auto& t = p.training;
  plan.replicas = replicas;
  plan.accumulate = t.accumulate;
  plan.trainSamples = trainSamples;
  if (t.batchSize < 1 || t.accumulate < 1 || replicas < 1)
    throw fieldError("training.batch_size", " and " + fieldInWords("training.accumulate") + " must be at least 1");
  if (t.perDeviceBatch) {
    const auto g = mulChecked(t.batchSize, int64_t{replicas} * t.accumulate);
    if (!g || *g > kMaxBatch)
      throw UserError("a per-device batch of " + std::to_string(t.batchSize) + " x " + std::to_string(replicas) + " replicas x " +
                          std::to_string(t.accumulate) + " micro-batches is more than " + std::to_string(kMaxBatch) +
                          " samples per update: lower " + fieldInWords("training.batch_size"),
                      "training.batch_size");
    plan.globalBatch = *g;
  } else {
    plan.globalBatch = t.batchSize;
  }
  if (plan.globalBatch > trainSamples)
    throw UserError("global batch " + std::to_string(plan.globalBatch) + " is larger than the training set (" +
                        std::to_string(trainSamples) + " samples): set " + fieldInWords("training.batch_size") + " to at most " +
                        std::to_string(trainSamples),
                    "training.batch_size");
  if (plan.globalBatch < t.accumulate)
    throw UserError("global batch " + std::to_string(plan.globalBatch) + " cannot be split into " + std::to_string(t.accumulate) +
                        " micro-batches: set " + fieldInWords("training.batch_size") + " to at least " +
                        std::to_string(t.accumulate) + " or lower " + fieldInWords("training.accumulate"),
                    "training.batch_size");
  plan.microBatch = (plan.globalBatch + t.accumulate - 1) / t.accumulate;
  plan.perReplicaBatch = (plan.microBatch + replicas - 1) / replicas;
  plan.smallestShard = (plan.globalBatch / t.accumulate) / replicas;
  plan.stepsPerEpoch = (trainSamples + plan.globalBatch - 1) / plan.globalBatch;
  plan.lastBatch = trainSamples - (plan.stepsPerEpoch - 1) * plan.globalBatch;
  plan.scaling = scaleLearningRate(t, plan.globalBatch);
  plan.baseLr = plan.scaling.baseLr;
  plan.lrRule = plan.scaling.rule;
  plan.lrFactor = plan.scaling.factor;
  plan.lr = plan.scaling.lr;
  plan.warmupEpochs = t.warmupEpochs;
  plan.lrDecayEpochs = t.lrDecayEpochs;
  plan.lrDecayFactor = t.lrDecayFactor;
  if (plan.smallestShard == 0)
    plan.warnings.push_back("the global batch (" + std::to_string(plan.microBatch) +
                            ") is smaller than the number of replicas (" + std::to_string(replicas) +
                            "): some replicas get no samples and only wait");
  const int64_t lastMicro = plan.lastBatch / t.accumulate;
  if (lastMicro < replicas && plan.smallestShard > 0)
    plan.warnings.push_back("the last batch of each epoch has " + std::to_string(plan.lastBatch) +
                            " samples: some replicas get none");
  if (t.lrScaling == LrRule::None && plan.globalBatch > plan.scaling.referenceBatch)
    plan.warnings.push_back(
        "the global batch (" + std::to_string(plan.globalBatch) + ") is " +
        shortNumber(static_cast<double>(plan.globalBatch) / static_cast<double>(plan.scaling.referenceBatch)) +
        "x the batch the learning rate was set for (" + std::to_string(plan.scaling.referenceBatch) +
        ") but the learning rate is unscaled: consider linear scaling with warm-up");
  return plan;
}

}  // namespace ml
