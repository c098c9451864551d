// Command-line options that override a project's values, shared by train, scale and evaluate.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "project/Project.h"

namespace mlcli {

// A positive whole number / a positive finite number. CLI11's PositiveNumber would answer "0"
// with a 309-digit bound and let "nan" through.
CLI::Validator positiveWhole();
CLI::Validator positiveFinite();

struct Overrides {
  std::optional<int> epochs;
  std::optional<int64_t> batchSize, perDeviceBatch;
  std::optional<double> lr;
  std::optional<std::string> optimizer, devices, lrScaling, allreduce, allreduceDtype, dataPath;
  std::optional<uint64_t> seed;
  std::optional<double> warmupEpochs, lrDecayFactor;
  std::vector<int64_t> lrDecayEpochs;
  std::optional<int> accumulate, threadsPerDevice;
  std::optional<int64_t> bucketKb, lrReferenceBatch;
  std::optional<std::string> checkpointEvery;
  std::optional<int> checkpointKeep;
  std::optional<double> hangSeconds, stragglerFactor;
  std::vector<std::string> inject;
  std::optional<std::string> precision, lossScale;
  std::optional<int64_t> lossScaleGrowthSteps;
  bool shardOptimizer = false;
  bool tf32 = false;

  void addTo(CLI::App* cmd, bool training);
  void apply(ml::Project& p) const;
};

}  // namespace mlcli
