// The batch / learning-rate arithmetic of a run, computed before it starts: the Trainer runs by
// it, and the studio's "what will happen" sentence and warnings are made from it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "project/LrScaling.h"
#include "project/Project.h"

namespace ml {

struct RunPlan {
  int replicas = 1;
  int64_t globalBatch = 0;      // samples per optimizer update
  int64_t microBatch = 0;       // samples per micro-batch (globalBatch / accumulate)
  int64_t perReplicaBatch = 0;  // largest shard of a micro-batch
  int64_t smallestShard = 0;
  int accumulate = 1;
  int64_t trainSamples = 0;
  int64_t stepsPerEpoch = 0;
  int64_t lastBatch = 0;  // samples in the last (partial) update of an epoch
  double baseLr = 0, lr = 0, lrFactor = 1;
  LrRule lrRule = LrRule::None;
  LrScaling scaling;  // the rule applied to this run's global batch
  double warmupEpochs = 0;
  std::vector<int64_t> lrDecayEpochs;  // step decay (Project.h)
  double lrDecayFactor = 0.1;
  // "multiplied by 0.1 after epochs 3 and 7", or empty without a step decay.
  std::string decayPhrase() const;
  std::vector<std::string> warnings;
  std::string sentence() const;  // "4 replicas x 64 = 256 samples per step; learning rate 0.004 (0.001 was set for ...)"
};

// Throws UserError for an impossible configuration (batch larger than the data set, ...).
RunPlan planRun(const Project& p, int replicas, int64_t trainSamples);

}  // namespace ml
