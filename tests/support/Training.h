// The tests' training loop: `steps` mirrored steps of batch B over a fixed order of a data set, with
// the checks every mirrored test makes after each step, and what the tests compare afterwards.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/Dataset.h"
#include "distribute/MirroredStrategy.h"

namespace mltest {

// How train() walks the data and what it checks after every step. The defaults are the strict
// ones; a test turns a check off only where its steps may legitimately fail it (loss scaling skips
// non-finite steps) or where it compares the replicas itself (several workers).
struct TrainOptions {
  float lr = 0.01f;
  uint64_t orderSeed = 5;       // the order is ml::epochOrder(size, orderSeed, 1)
  bool expectFinite = true;     // EXPECT each step's result finite
  bool expectFullBatch = true;  // EXPECT each step to count B samples
  bool checkReplicas = true;    // EXPECT every replica's checksum equal after each step
};

struct Trained {
  std::vector<float> weights;            // replica 0's parameters after the last step
  std::vector<double> losses;            // each step's mean loss
  std::vector<ml::StepResult> steps;     // each step's result
  std::vector<uint64_t> checksums;       // replica 0's after each step (with checkReplicas)
  std::vector<uint64_t> finalChecksums;  // every replica's (of every worker) after the last step
  std::string allReduce;                 // the strategy's allReducePath()
};

// Steps k = 1..steps take samples [(k-1)B, kB) of the order, `accumulate` micro-batches each, at
// step number k (dropout's seed).
Trained train(ml::MirroredStrategy& s, const ml::Dataset& data, int64_t B, int steps, int accumulate = 1,
              const TrainOptions& options = {});

}  // namespace mltest
